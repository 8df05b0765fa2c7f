"""Correctness of a variant against eager: dtype-aware tolerances, and an fp64-reference check for
variants that legitimately run other kernels.

float32 uses ``torch.testing.assert_close``'s defaults (atol 1e-5, rtol 1.3e-6). bfloat16/float16 use
wider bounds: a captured graph may pick other cuBLAS / SDPA kernels than the eager call (for instance
HF transformers builds an explicit mask instead of ``is_causal`` while a stream is capturing), and in
bfloat16 that moves values by a few ulps (one ulp at 4.0 is 0.03; seen on bert-tiny on the H200).

Two checks, chosen by what a variant is allowed to change:

* **strict** (:func:`assert_matches_eager`): ``assert_close`` at the dtype's tolerance. A ``graph``
  replay runs the eager kernels, so it must pass this (on the H200 it is bit-identical).
* **fp64 RMSE** (:func:`fp64_rmse_check`), for variants that run *other* kernels (``padded`` attends
  over 1024 masked positions with another SDPA kernel, ``compile``/``compile+graph`` fuse ops with
  inductor): elementwise ``atol=1e-5`` then measures only reduction order, not correctness. Instead,
  the variant's error against a float64 run of the same weights must be at most ``multiplier`` times
  eager's own error against it (+ ``atol / 10``). This is the accuracy check of PyTorch's inductor
  benchmarks: ``torch._dynamo.utils.same(ref, res, fp64_ref=...)`` (multiplier 2 for float32, 3 for
  bfloat16/float16).
"""

from __future__ import annotations

from dataclasses import dataclass

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


#: dtype name -> RMSE multiplier of :func:`fp64_rmse_check` (as in ``torch._dynamo.utils.same``).
FP64_RMSE_MULTIPLIER = {"float32": 2.0, "bfloat16": 3.0, "float16": 3.0}


def rmse(a, b) -> float:
    """Root mean squared difference of two tensors, computed in float64 (NaN when either holds NaN)."""
    import torch

    return float(torch.sqrt(torch.mean(torch.square(a.double() - b.double()))))


@dataclass(frozen=True)
class Fp64Check:
    """Result of :func:`fp64_rmse_check` for one output.

    ``rmse``: RMSE(variant, fp64 reference); ``eager_rmse``: RMSE(eager, fp64 reference);
    ``limit``: ``multiplier * eager_rmse + atol / 10``; all in the output's units (logits).
    """

    rmse: float
    eager_rmse: float
    limit: float

    @property
    def passed(self) -> bool:
        """True when ``rmse <= limit`` (False when either RMSE is NaN)."""
        return self.rmse <= self.limit

    @property
    def ratio(self) -> float:
        """``rmse / eager_rmse``: how much farther from float64 the variant is than eager (inf when
        eager matches float64 exactly and the variant does not)."""
        if self.eager_rmse > 0:
            return self.rmse / self.eager_rmse
        return 0.0 if self.rmse == 0 else float("inf")


def fp64_rmse_check(actual, eager, fp64_ref, dtype=None) -> Fp64Check:
    """Is ``actual`` as close to the float64 reference as eager is?

    Args:
        actual: the variant's output, e.g. logits ``[1, seq_len, vocab]`` in the model dtype.
        eager: the eager output for the same input, same shape.
        fp64_ref: the same model with its weights upcast to float64, on the same input, same shape.
        dtype: the model dtype (name or ``torch.dtype``); default ``eager.dtype``.

    Returns:
        :class:`Fp64Check`; ``passed`` when RMSE(actual, fp64) <= m * RMSE(eager, fp64) + atol / 10, with
        m from :data:`FP64_RMSE_MULTIPLIER` and atol from :data:`TOLERANCES`.

    Source: the fp64-reference branch of ``torch._dynamo.utils.same`` (PyTorch inductor accuracy checks).
    """
    name = _name(dtype or eager.dtype)
    eager_rmse = rmse(eager, fp64_ref)
    limit = FP64_RMSE_MULTIPLIER[name] * eager_rmse + TOLERANCES[name]["atol"] / 10.0
    return Fp64Check(rmse=rmse(actual, fp64_ref), eager_rmse=eager_rmse, limit=limit)


#: A greedy token that differs from the reference's is a near tie when the reference's own logits rate
#: both within this many units of the dtype's rounding (``eps x max |logit|``) of each other.
NEAR_TIE_EPS = 2.0


@dataclass(frozen=True)
class TokenCheck:
    """Greedy tokens of a decoder against a reference (HF ``generate``).

    ``identical``: every token equal. Otherwise ``first_diff`` is the index of the first differing token,
    ``logit_gap`` the reference's logit of its own token minus its logit of ours at that step, and
    ``near_tie`` whether that gap is within :data:`NEAR_TIE_EPS` roundings of the dtype (a static and a
    dynamic KV cache attend over different lengths, so in bfloat16 an exact tie can break either way).
    """

    identical: bool
    first_diff: int | None = None
    logit_gap: float | None = None
    near_tie: bool = False

    @property
    def summary(self) -> str:
        if self.identical:
            return "tokens identical to generate"
        tie = "a near tie" if self.near_tie else "not a near tie"
        return f"token {self.first_diff} differs from generate's (logit gap {self.logit_gap:.4g}: {tie})"


def check_greedy_tokens(got, reference, reference_logits=None, dtype=None) -> TokenCheck:
    """Compare greedy tokens ``got`` with ``reference`` (both ``[1, new_tokens]`` int64).

    ``reference_logits``: the reference's per-step logits (``generate(..., output_logits=True).logits``,
    a sequence of ``[1, vocab]`` tensors), used to tell a near tie from a real difference at the first
    differing token; without them a difference is never called a near tie. Method: the greedy-output
    comparison of vLLM's model tests (``check_logprobs_close``: a divergence is accepted only where
    the reference rates both tokens alike), with a rounding-based bound instead of top-k logprobs.
    ``dtype``: the model's dtype (name or ``torch.dtype``), whose rounding bounds the tie (default: the
    logits' dtype).
    """
    import torch

    if got.shape == reference.shape and torch.equal(got.cpu(), reference.cpu()):
        return TokenCheck(True)
    n = min(got.shape[-1], reference.shape[-1])
    diff = (got[..., :n].cpu() != reference[..., :n].cpu()).nonzero()
    first = int(diff[0, -1]) if len(diff) else n
    if reference_logits is None or first >= len(reference_logits) or first >= n:
        return TokenCheck(False, first)
    logits = reference_logits[first][0].float().cpu()
    ours, theirs = int(got[0, first]), int(reference[0, first])
    gap = float(logits[theirs] - logits[ours])
    eps = torch.finfo(getattr(torch, _name(dtype)) if dtype is not None else reference_logits[first].dtype).eps
    near = gap <= NEAR_TIE_EPS * eps * float(logits.abs().max())
    return TokenCheck(False, first, gap, bool(near))
