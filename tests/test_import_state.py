"""The test process's import state that pytester's sys.modules snapshots must not undo (see tests/conftest.py)."""

import sys


def test_functional_collectives_are_imported_before_any_pytester_test():
    """Imported by tests/conftest.py: were it first imported inside a pytester test, the snapshot restore would
    drop it, and importing it again (any later transformers generation import) raises in torch."""
    assert "torch.distributed._functional_collectives" in sys.modules


def test_a_module_imported_in_a_pytester_test_stays_imported(pytester):
    """Run with this directory's conftest: a module first imported in a pytester test is still in sys.modules
    in the next test of the same process (pytester's own restore would drop it)."""
    from pathlib import Path

    pytester.makeconftest((Path(__file__).parent / "conftest.py").read_text())
    pytester.makepyfile(module_imported_once="VALUE = 1")
    pytester.makepyfile(test_inner="""
        import sys

        def test_imports_it_inside_a_pytester_test(pytester):
            import module_imported_once  # noqa: F401

        def test_it_is_still_imported():
            assert "module_imported_once" in sys.modules
    """)
    result = pytester.runpytest_subprocess("-p", "pytester", "-p", "no:cacheprovider", "-p", "no:xdist", "-q")
    result.assert_outcomes(passed=2)
