"""The gate's self-test (``cudagraph-bench selftest``, docs/gate.md) in one folder; each module keeps the layer of what
it does (faults: measure; runs: runner; verdicts: results; command: commands)."""
