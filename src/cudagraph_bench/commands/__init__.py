"""Commands that span the layers (``cudagraph-bench run``: measure, then report)."""
