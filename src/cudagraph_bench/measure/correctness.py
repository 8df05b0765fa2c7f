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
  eager's own error against it (+ ``tol / 10``). This is the accuracy check of PyTorch's inductor
  benchmarks: ``torch._dynamo.utils.same(ref, res, fp64_ref=...)`` (multiplier 2 for float32, 3 for
  bfloat16/float16; ``tol`` its default 1e-4 for float32, the dtype's ``atol`` for bfloat16/float16).
  In float32 eager's own RMSE is tiny, so another kernel's reduction order alone (a 1-token prompt attended
  over 1024 padded slots) can reach a few times it; ``tol / 10`` absorbs that, while a stale mask moves the
  logits by orders of magnitude more.
"""

from __future__ import annotations

from dataclasses import dataclass

from cudagraph_bench.variants import DECODE_REFERENCE

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

#: dtype name -> ``tol`` of :func:`fp64_rmse_check`, whose tenth is the slack above the multiplied RMSE:
#: ``torch._dynamo.utils.same``'s default 1e-4 for float32, the ``assert_close`` atol for half types.
FP64_RMSE_TOL = {"float32": 1e-4, "bfloat16": TOLERANCES["bfloat16"]["atol"], "float16": TOLERANCES["float16"]["atol"]}


def rmse(a, b) -> float:
    """Root mean squared difference of two tensors, computed in float64 (NaN when either holds NaN)."""
    import torch

    return float(torch.sqrt(torch.mean(torch.square(a.double() - b.double()))))


@dataclass(frozen=True)
class Fp64Check:
    """Result of :func:`fp64_rmse_check` for one output.

    ``rmse``: RMSE(variant, fp64 reference); ``eager_rmse``: RMSE(eager, fp64 reference);
    ``limit``: ``multiplier * eager_rmse + tol / 10``; all in the output's units (logits).
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
        :class:`Fp64Check`; ``passed`` when RMSE(actual, fp64) <= m * RMSE(eager, fp64) + tol / 10, with
        m from :data:`FP64_RMSE_MULTIPLIER` and tol from :data:`FP64_RMSE_TOL`.

    Source: the fp64-reference branch of ``torch._dynamo.utils.same`` (PyTorch inductor accuracy checks).
    """
    name = _name(dtype or eager.dtype)
    eager_rmse = rmse(eager, fp64_ref)
    limit = FP64_RMSE_MULTIPLIER[name] * eager_rmse + FP64_RMSE_TOL[name] / 10.0
    return Fp64Check(rmse=rmse(actual, fp64_ref), eager_rmse=eager_rmse, limit=limit)


def fp64_reference_model(model):
    """A float64 copy of ``model`` (same weights upcast, same device) for the fp64 RMSE checks.

    A mixture-of-experts copy gets the experts implementation that runs in float64. Costs 8 bytes per
    parameter of device memory until it is dropped."""
    import copy

    import torch

    from cudagraph_bench.models.presets import use_graph_safe_experts

    model64 = copy.deepcopy(model).to(torch.float64)
    use_graph_safe_experts(model64, torch.float64)
    return model64


def fp64_decode_logits(model, input_ids, tokens):
    """Logits of ``model`` run in float64 for every greedy step, teacher-forced on ``tokens``.

    Args:
        model: a causal LM (any dtype, any device).
        input_ids: the prompt ``[1, L]`` int64.
        tokens: the reference's generated tokens ``[1, n]`` int64 (HF ``generate``).

    Returns:
        ``[n, vocab]`` float64 on the CPU: row ``s`` is what a float64 model predicts after the prompt and
        ``tokens[:, :s]``, i.e. the context of greedy step ``s``.

    A float64 copy of the model (:func:`fp64_reference_model`, dropped before returning) where it fits in the
    device's free memory; else the model itself, each module's weights upcast while it runs
    (:func:`float64_in_place`): a 21B-parameter bfloat16 model needs 168 GB for the copy, one layer's experts
    a few GB.
    """
    import torch

    device = next(model.parameters()).device
    context = torch.cat([input_ids, tokens[:, :-1]], dim=1).to(device)            # [1, L + n - 1]
    if not fp64_copy_fits(model):
        with float64_in_place(model), torch.no_grad():
            logits = model(input_ids=context, attention_mask=torch.ones_like(context)).logits
        return logits[0, input_ids.shape[1] - 1:].to(torch.float64).cpu()
    model64 = fp64_reference_model(model)
    try:
        with torch.inference_mode():
            logits = model64(input_ids=context, attention_mask=torch.ones_like(context)).logits
        return logits[0, input_ids.shape[1] - 1:].cpu()                              # [n, vocab]
    finally:
        del model64
        if device.type == "cuda":
            torch.cuda.empty_cache()


#: Share of the device's free memory a float64 copy of the model may take (the rest: activations, logits).
FP64_COPY_SHARE = 0.8


def fp64_copy_fits(model) -> bool:
    """True when a float64 copy of ``model`` (8 bytes per parameter) fits in :data:`FP64_COPY_SHARE` of its
    CUDA device's free memory (``torch.cuda.mem_get_info``); always True on the CPU."""
    import torch

    device = next(model.parameters()).device
    if device.type != "cuda":
        return True
    need = 8 * sum(p.numel() for p in model.parameters())
    return need <= FP64_COPY_SHARE * torch.cuda.mem_get_info(device)[0]


class float64_in_place:
    """Context manager: ``model`` runs in float64 without a copy. Each module with parameters has them upcast to
    float64 just before its forward and restored (the same tensors, bit for bit) just after, so at most one
    module's float64 weights exist at a time; a mixture-of-experts model runs transformers' ``eager`` experts
    (a loop over the experts hit: no grouped GEMM, which is bfloat16 only, and no per-token weight gather).
    Everything is restored on exit, also after an exception. Run the forward under ``torch.no_grad()``, not
    ``inference_mode`` (a parameter's ``.data`` is swapped)."""

    def __init__(self, model):
        self.model, self._handles, self._saved, self._experts = model, [], {}, None

    def _upcast(self, module, args):
        import torch

        for name, p in module.named_parameters(recurse=False):
            if p.is_floating_point() and p.dtype != torch.float64:
                self._saved[(id(module), name)] = (p, p.data)
                p.data = p.data.to(torch.float64)

    def _restore(self, module, args=None, output=None):
        for name, _ in module.named_parameters(recurse=False):
            p, data = self._saved.pop((id(module), name), (None, None))
            if p is not None:
                p.data = data

    def __enter__(self):
        from cudagraph_bench.models.presets import experts_implementation, is_mixture_of_experts

        if is_mixture_of_experts(self.model) and hasattr(self.model, "set_experts_implementation"):
            self._experts = experts_implementation(self.model)
            self.model.set_experts_implementation("eager")
        for m in self.model.modules():
            if any(True for _ in m.parameters(recurse=False)):
                self._handles += [m.register_forward_pre_hook(self._upcast), m.register_forward_hook(self._restore)]
        return self.model

    def __exit__(self, *exc):
        for h in self._handles:
            h.remove()
        for p, data in self._saved.values():
            p.data = data
        self._handles, self._saved = [], {}
        if self._experts is not None:
            self.model.set_experts_implementation(self._experts)
        return False


@dataclass(frozen=True)
class DecodeCheck:
    """Greedy decode against HF ``generate``, judged step by step by a float64 run of the same weights.

    ``identical``: every token equal. ``first_diff``: index of the first differing token (None when
    identical). ``steps``: how many steps had their logits compared: every step up to and including
    ``first_diff``, where both decoders saw the same context. ``worst_step``/``worst``: the step whose
    :class:`Fp64Check` (ours vs ``generate``'s logits, both against float64) has the largest ratio.
    ``distinct_reference_tokens``: distinct tokens in ``generate``'s output (random weights can make a
    model repeat one token; the logits comparison still covers every step then). ``reference_name``: what
    the reference decoder is, in the summary (``generate``, or ``static-eager`` for a compiled decoder
    judged against the eager static-cache loop by the same rule).
    """

    identical: bool
    first_diff: int | None
    steps: int
    worst_step: int
    worst: Fp64Check
    distinct_reference_tokens: int
    reference_name: str = DECODE_REFERENCE

    @property
    def passed(self) -> bool:
        """Every compared step's logits are as close to float64 as ``generate``'s (see
        :func:`fp64_rmse_check`). A differing token at such a step is a rounding tie: both decoders
        computed the same values to within their dtype's rounding and broke the tie differently."""
        return self.worst.passed

    @property
    def summary(self) -> str:
        ref = self.reference_name
        ratio = f"worst RMSE ratio to float64 {self.worst.ratio:.2f} of {ref}'s at step {self.worst_step}"
        if not self.passed:
            where = "tokens identical" if self.identical else f"token {self.first_diff} differs"
            return (f"logits at step {self.worst_step} are farther from float64 than {ref}'s "
                    f"(RMSE {self.worst.rmse:.4g} > limit {self.worst.limit:.4g}); {where}")
        if self.identical:
            return f"tokens identical to {ref}; logits of all {self.steps} steps checked ({ratio})"
        return (f"token {self.first_diff} differs from {ref}'s, a rounding tie: logits of the "
                f"{self.steps} steps up to it as close to float64 as {ref}'s ({ratio})")


def check_decode_against_generate(got, got_logits, reference, reference_logits, fp64_logits,
                                  dtype=None, *, reference_name: str = DECODE_REFERENCE) -> DecodeCheck:
    """Compare a greedy decoder with HF ``generate(do_sample=False)``.

    Args:
        got: our tokens ``[1, n]`` int64; ``got_logits``: the ``n`` logits ``[1, vocab]`` they were chosen from
            (:meth:`~cudagraph_bench.capture.decode.GreedyDecoder.generate` with ``return_logits=True``).
        reference, reference_logits: the same from ``generate(..., output_logits=True)``.
        fp64_logits: ``[n, vocab]`` from :func:`fp64_decode_logits` on ``reference``.
        dtype: the model dtype (name or ``torch.dtype``); default: the logits' dtype.
        reference_name: the reference decoder's name in the summary (another greedy decoder's tokens and
            logits can be the reference, e.g. the eager static-cache loop's, with ``fp64_logits`` of its tokens).

    Method: at every step up to and including the first differing token (the contexts are identical
    there), our logits must not be farther from float64 than ``generate``'s own (:func:`fp64_rmse_check`).
    This is the inductor accuracy rule applied per step, and the stopping rule of vLLM's greedy-output
    comparison (``check_logprobs_close``: after the first divergence the contexts differ). A static and a
    dynamic KV cache attend over different lengths with other kernels, so in bfloat16/float16 a token can
    differ at a tie; a wrong cache, mask or position moves the logits far beyond rounding and fails.

    Returns:
        :class:`DecodeCheck`. Raises ``ValueError`` when the inputs have different lengths.
    """
    import torch

    n = got.shape[-1]
    if reference.shape[-1] != n or len(got_logits) != n or len(reference_logits) != n or fp64_logits.shape[0] != n:
        raise ValueError(f"lengths differ: tokens {n} and {reference.shape[-1]}, logits {len(got_logits)}, "
                         f"{len(reference_logits)} and {fp64_logits.shape[0]}")
    diff = (got.cpu() != reference.cpu()).nonzero()
    first = int(diff[0, -1]) if len(diff) else None
    steps = n if first is None else first + 1
    checks = [fp64_rmse_check(got_logits[s][0].cpu(), reference_logits[s][0].cpu(), fp64_logits[s],
                              dtype or reference_logits[s].dtype) for s in range(steps)]
    worst_step = max(range(steps), key=lambda s: (not checks[s].passed, checks[s].ratio))
    return DecodeCheck(first is None, first, steps, worst_step, checks[worst_step],
                       len(set(reference[0].tolist())), reference_name)
