"""The test process's import state that pytester's sys.modules snapshots must not undo (see tests/conftest.py)."""

import sys


def test_functional_collectives_are_imported_before_any_pytester_test():
    """Imported by tests/conftest.py: were it first imported inside a pytester test, the snapshot restore would
    drop it, and importing it again (any later transformers generation import) raises in torch."""
    assert "torch.distributed._functional_collectives" in sys.modules
