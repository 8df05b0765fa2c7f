"""Correctness of a replay against eager: dtype-aware tolerances.

float32 uses ``torch.testing.assert_close``'s defaults (atol 1e-5, rtol 1.3e-6). bfloat16/float16 use
wider bounds: a captured graph may pick other cuBLAS / SDPA kernels than the eager call (for instance
HF transformers builds an explicit mask instead of ``is_causal`` while a stream is capturing), and in
bfloat16 that moves values by a few ulps (one ulp at 4.0 is 0.03; seen on bert-tiny on the H200).
"""

from __future__ import annotations

#: dtype name -> ``assert_close`` keyword arguments.
TOLERANCES = {
    "float32": {"atol": 1e-5, "rtol": 1.3e-6},
    "bfloat16": {"atol": 5e-2, "rtol": 1.6e-2},
    "float16": {"atol": 5e-3, "rtol": 1e-3},
}


def _name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def tolerance(dtype) -> dict:
    """``assert_close`` tolerances for a dtype (name or ``torch.dtype``)."""
    return dict(TOLERANCES[_name(dtype)])


def assert_matches_eager(actual, expected, dtype=None) -> None:
    """``torch.testing.assert_close(actual, expected)`` at the dtype's tolerance; NaN never passes.

    Raises:
        AssertionError: with the max abs/rel difference, when a value is outside the tolerance.
    """
    import torch

    torch.testing.assert_close(actual, expected, equal_nan=False, **tolerance(dtype or expected.dtype))


def max_abs_diff(a, b) -> float:
    """max |a - b| in float64 (inf when either holds NaN where the other does not)."""
    import torch

    diff = (a.double() - b.double()).abs()
    return float("inf") if torch.isnan(diff).any() else float(diff.max())
