"""cudagraph-bench: measure, prove and guard what CUDA graph capture/replay buys over eager
PyTorch / Hugging Face transformers inference for LLMs at batch 1.

Subpackages, one layer each; a module imports only its own layer and those below it (the layers and their
modules: docs/architecture.md, checked by ``tests/test_layout.py``)."""

__version__ = "0.1.0"
