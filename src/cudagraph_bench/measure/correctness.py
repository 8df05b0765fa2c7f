"""Correctness of a variant against eager (docs/measurement.md, "Correctness rules"): the strict ``assert_close`` check
for variants running eager's kernels, the fp64 RMSE check for variants running other kernels. Half types get wider
tolerances: a captured graph may pick other cuBLAS / SDPA kernels than eager."""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass

from cudagraph_bench.models.presets import experts_implementation, is_mixture_of_experts, use_graph_safe_experts
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
    """``torch.testing.assert_close`` at the dtype's tolerance; NaN never passes. AssertionError with the max abs/rel
    difference when a value is outside the tolerance."""
    import torch

    torch.testing.assert_close(actual, expected, equal_nan=False, **tolerance(dtype or expected.dtype))


def max_abs_diff(a, b) -> float:
    """max |a - b| in float64 (inf when either holds NaN where the other does not)."""
    import torch

    diff = (a.double() - b.double()).abs()
    return float("inf") if torch.isnan(diff).any() else float(diff.max())


#: dtype name -> RMSE multiplier of :func:`fp64_rmse_check` (as in ``torch._dynamo.utils.same``).
FP64_RMSE_MULTIPLIER = {"float32": 2.0, "bfloat16": 3.0, "float16": 3.0}

#: dtype name -> ``tol`` of :func:`fp64_rmse_check` (a tenth is the slack): ``same``'s 1e-4 for float32, else atol.
FP64_RMSE_TOL = {"float32": 1e-4, "bfloat16": TOLERANCES["bfloat16"]["atol"], "float16": TOLERANCES["float16"]["atol"]}


def rmse(a, b) -> float:
    """Root mean squared difference in float64 (NaN when either holds NaN)."""
    import torch

    return float(torch.sqrt(torch.mean(torch.square(a.double() - b.double()))))


@dataclass(frozen=True)
class Fp64Check:
    """Result of :func:`fp64_rmse_check` in the output's units (logits): ``rmse`` (variant vs the fp64 reference),
    ``eager_rmse`` (eager vs it), ``limit`` (``multiplier * eager_rmse + tol / 10``)."""

    rmse: float
    eager_rmse: float
    limit: float

    @property
    def passed(self) -> bool:
        """``rmse <= limit`` (False when either RMSE is NaN)."""
        return self.rmse <= self.limit

    @property
    def ratio(self) -> float:
        """``rmse / eager_rmse`` (inf when eager matches float64 exactly and the variant does not)."""
        if self.eager_rmse > 0:
            return self.rmse / self.eager_rmse
        return 0.0 if self.rmse == 0 else float("inf")


def fp64_rmse_check(actual, eager, fp64_ref, dtype=None) -> Fp64Check:
    """Is ``actual`` as close to the float64 reference ``fp64_ref`` as ``eager`` is (same shapes, e.g. logits ``[1,
    seq_len, vocab]``)? The fp64-reference branch of ``torch._dynamo.utils.same`` (PyTorch inductor's accuracy check):
    passed when RMSE(actual, fp64) <= m * RMSE(eager, fp64) + tol / 10. ``dtype`` defaults to ``eager.dtype``."""
    name = _name(dtype or eager.dtype)
    eager_rmse = rmse(eager, fp64_ref)
    limit = FP64_RMSE_MULTIPLIER[name] * eager_rmse + FP64_RMSE_TOL[name] / 10.0
    return Fp64Check(rmse=rmse(actual, fp64_ref), eager_rmse=eager_rmse, limit=limit)


def fp64_reference_model(model):
    """A float64 copy of ``model`` on its device (MoE: experts that run in float64): 8 bytes per parameter."""
    import torch

    model64 = copy.deepcopy(model).to(torch.float64)
    use_graph_safe_experts(model64, torch.float64)
    return model64


def fp64_decode_logits(model, input_ids, tokens):
    """``[n, vocab]`` float64 logits on the CPU of ``model`` run in float64 after the prompt ``input_ids [1, L]`` int64,
    teacher-forced on the reference's tokens ``[1, n]`` int64: row ``s`` is the context of greedy step ``s``. Upcasts in
    place where a copy does not fit (a 21B-parameter model needs 168 GB for the copy)."""
    import torch

    device = next(model.parameters()).device
    context = torch.cat([input_ids, tokens[:, :-1]], dim=1).to(device)            # [1, L + n - 1]
    model64 = fp64_reference_model(model) if fp64_copy_fits(model) else None
    try:
        with float64_in_place(model) if model64 is None else contextlib.nullcontext(), torch.no_grad():
            logits = (model if model64 is None else model64)(input_ids=context,
                                                              attention_mask=torch.ones_like(context)).logits
        return logits[0, input_ids.shape[1] - 1:].to(torch.float64).cpu()
    finally:
        del model64
        if device.type == "cuda":
            torch.cuda.empty_cache()


#: Share of the device's free memory a float64 copy of the model may take (the rest: activations, logits).
FP64_COPY_SHARE = 0.8


def fp64_copy_fits(model) -> bool:
    """A float64 copy fits in :data:`FP64_COPY_SHARE` of the device's free memory; True on CPU."""
    import torch

    device = next(model.parameters()).device
    if device.type != "cuda":
        return True
    need = 8 * sum(p.numel() for p in model.parameters())
    return need <= FP64_COPY_SHARE * torch.cuda.mem_get_info(device)[0]


@contextlib.contextmanager
def float64_in_place(model):
    """``model`` runs in float64 without a copy, each module's parameters upcast just before its forward and restored
    bit for bit after (also after an exception). Run under ``torch.no_grad()``, not ``inference_mode`` (a parameter's
    ``.data`` is swapped)."""
    import torch

    saved: dict = {}

    def upcast(module, args):
        for name, p in module.named_parameters(recurse=False):
            if p.is_floating_point() and p.dtype != torch.float64:
                saved[(id(module), name)] = (p, p.data)
                p.data = p.data.to(torch.float64)

    def restore(module, args, output):
        for name, _ in module.named_parameters(recurse=False):
            p, data = saved.pop((id(module), name), (None, None))
            if p is not None:
                p.data = data

    experts = None
    if is_mixture_of_experts(model) and hasattr(model, "set_experts_implementation"):
        experts = experts_implementation(model)
        model.set_experts_implementation("eager")
    handles = [h for m in model.modules() if any(True for _ in m.parameters(recurse=False))
               for h in (m.register_forward_pre_hook(upcast), m.register_forward_hook(restore))]
    try:
        yield model
    finally:
        for h in handles:
            h.remove()
        for p, data in saved.values():
            p.data = data
        if experts is not None:
            model.set_experts_implementation(experts)


@dataclass(frozen=True)
class DecodeCheck:
    """Greedy decode against a reference decoder, judged step by step by a float64 run. ``first_diff``: first differing
    token (None when ``identical``); ``steps``: compared steps, up to and including ``first_diff``;
    ``worst_step``/``worst``: the step of the largest ratio; ``reference_name``: ``generate`` or ``static-eager``."""

    identical: bool
    first_diff: int | None
    steps: int
    worst_step: int
    worst: Fp64Check
    distinct_reference_tokens: int
    reference_name: str = DECODE_REFERENCE

    @property
    def passed(self) -> bool:
        """Each compared step as close to float64 as the reference: a differing token is a tie."""
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
    """A :class:`DecodeCheck` of a greedy decoder against HF ``generate(do_sample=False)`` or another reference: up to
    and including the first differing token, our logits must not be farther from float64 than the reference's
    (inductor's accuracy rule per step, stopping as vLLM's ``check_logprobs_close`` does). ``got``: tokens ``[1, n]``
    int64, ``got_logits``: ``n`` logits ``[1, vocab]``, likewise the reference's; ``fp64_logits``: ``[n, vocab]``.
    Raises ValueError when the inputs have different lengths."""
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
