"""cudagraph-bench: measure, prove and guard what CUDA graph capture/replay buys over eager PyTorch / transformers LLM
inference at batch 1. One layer per subpackage; imports point only down (docs/architecture.md)."""

__version__ = "0.1.0"
