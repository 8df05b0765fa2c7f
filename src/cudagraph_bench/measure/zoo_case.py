"""The checks of one model type of the architecture zoo, per part, on a GPU or as far as possible on the CPU."""

from __future__ import annotations

import contextlib
import copy
import os
import statistics
import traceback
from dataclasses import dataclass, field
from typing import Callable

from cudagraph_bench.capture.decode import GreedyDecoder
from cudagraph_bench.capture.graphed import GraphedForward
from cudagraph_bench.capture.host_work import capture_path_host_work
from cudagraph_bench.capture.module_state import state_outside_cache_reason
from cudagraph_bench.errors import CaptureError, NotGraphableError
from cudagraph_bench.measure.correctness import (assert_matches_eager, check_decode_against_generate,
                                                 fp64_decode_logits, max_abs_diff)
from cudagraph_bench.measure.timing import time_call
from cudagraph_bench.models.presets import model_forward, random_input_ids, torch_dtype, use_graph_safe_experts
from cudagraph_bench.zoo_keys import (AWAITS_GPU, CACHE_TOKENS, DTYPE, FAILED, MEASURED, NEW_TOKENS, NOT_GRAPHABLE,
                                      PREFILL_BUCKETS, PROMPT_TOKENS, REFUSED)

#: A decoder's check against ``generate`` that passed (per prefill; the part is measured when it is timed).
PASSED = "passed"
#: ``info["phase"]`` of a part refused because transformers' own eager forward or ``generate`` raised.
EAGER_PHASE = "eager"
#: Fresh inputs each forward replay is checked on against eager.
CHECK_INPUTS = 3
#: Seeds of the forward inputs and of the decode prompt.
INPUT_SEED = 100
PROMPT_SEED = 7


@dataclass
class ZooOutcome:
    """How one part of one type ended. ``reason``: one line naming the layer, op or config field (None when measured or
    awaiting a GPU); ``timed``, ``reference``: on a GPU the graphed call and its eager peer, else None;
    ``tokens_per_call``: 1 for a forward; ``close``: drops the graphs (after timing)."""

    status: str
    reason: str | None = None
    info: dict = field(default_factory=dict)
    timed: Callable[[], object] | None = None
    reference: Callable[[], object] | None = None
    tokens_per_call: int = 1
    close: Callable[[], None] = lambda: None


def first_line(exc: BaseException, width: int = 240) -> str:
    """``"Type: first line"`` of the chain's root exception, cut to ``width`` characters."""
    seen = set()
    while (exc.__cause__ or exc.__context__) is not None and id(exc) not in seen and not str(exc).strip():
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    text = (str(exc).strip().splitlines() or [""])[0].strip()
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= width else text[: width - 3] + "..."


def model_code_line(exc: BaseException) -> str | None:
    """``transformers/models/x/modeling_x.py:123`` when the innermost non-torch frame is model code."""
    import torch

    torch_folder = os.path.dirname(torch.__file__) + os.sep
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if os.path.abspath(frame.filename).startswith(torch_folder):
            continue
        parts = frame.filename.replace(os.sep, "/").split("/")
        if "transformers" in parts and parts[parts.index("transformers") + 1:][:1] == ["models"]:
            return "/".join(parts[parts.index("transformers"):]) + f":{frame.lineno}"
        return None
    return None


def _inputs(model, n: int, seed: int) -> list:
    import torch

    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    return [random_input_ids(model, PROMPT_TOKENS, device=device, generator=generator) for _ in range(n)]


def meta_host_work(model, seq_len: int = PROMPT_TOKENS) -> str | None:
    """The host work a capture of the forward would meet (one line) or None, found on a ``meta`` copy. Raises
    NotGraphableError for RoPE changing on the host within ``seq_len``, else what the forward raises on ``meta``."""
    import torch

    meta = copy.deepcopy(model).to("meta", dtype=torch_dtype(DTYPE))
    use_graph_safe_experts(meta, DTYPE)
    ids = torch.zeros(1, seq_len, dtype=torch.int64, device="meta")
    with torch.inference_mode():
        return capture_path_host_work(meta, lambda: model_forward(meta, ids), "meta", max_positions=seq_len)


def forward_outcome(model, device: str) -> ZooOutcome:
    """Forward part: on ``"cuda"`` captured, checked against eager with the static output poisoned, ready to time; on
    ``"cpu"`` the eager forward and :func:`meta_host_work`, so a model a GPU would refuse is named up front."""
    import torch

    (ids,) = _inputs(model, 1, INPUT_SEED - 1)
    try:
        with torch.inference_mode():
            model_forward(model, ids)
    except Exception as exc:   # noqa: BLE001 - transformers' own forward of the type
        return ZooOutcome(REFUSED, f"{type(model).__name__}'s eager forward raises {first_line(exc)}",
                          info={"phase": EAGER_PHASE})
    if device == "cpu":
        try:
            found = meta_host_work(model)
        except NotGraphableError as exc:
            return ZooOutcome(NOT_GRAPHABLE, str(exc))
        except Exception as exc:   # noqa: BLE001 - only the GPU can tell then
            return ZooOutcome(AWAITS_GPU, info={"note": f"the host-work check on meta did not run: {first_line(exc)}"})
        if found:
            return ZooOutcome(NOT_GRAPHABLE, f"{type(model).__name__} does host work in its forward that a CUDA graph "
                                             f"capture forbids: {found}")
        return ZooOutcome(AWAITS_GPU, info={"note": "no host work found on meta"})
    return _graphed_forward(model, ids)


def _graphed_forward(model, ids) -> ZooOutcome:
    import torch

    try:
        graph = GraphedForward(model, PROMPT_TOKENS)
    except NotGraphableError as exc:
        return ZooOutcome(NOT_GRAPHABLE, str(exc))
    except CaptureError as exc:
        return ZooOutcome(FAILED, str(exc), info={"phase": "capture"})
    worst = 0.0
    dtype = next(model.parameters()).dtype
    try:
        for fresh in _inputs(model, CHECK_INPUTS, INPUT_SEED):
            with torch.inference_mode():
                expected = model_forward(model, fresh).clone()
                graph.static_output.fill_(float("nan"))
            got = graph(fresh)
            torch.cuda.synchronize()
            assert_matches_eager(got, expected, dtype)
            worst = max(worst, max_abs_diff(got, expected))
    except AssertionError as exc:
        graph.close()
        return ZooOutcome(FAILED, f"graph replay differs from eager on a fresh input: {first_line(exc)}",
                          info={"phase": "check"})
    return ZooOutcome(MEASURED, None, {"check": f"replay == eager on {CHECK_INPUTS} fresh inputs",
                                       "max_abs_diff": worst, "capture_ms": graph.capture_ms, "seq_len": PROMPT_TOKENS},
                      timed=lambda: graph(ids), reference=lambda: model_forward(model, ids), close=graph.close)


def decode_outcome(model, device: str, generate, *, with_compile: bool = False) -> ZooOutcome:
    """Decode part: the suite's greedy decoder (graphed on a GPU) with unpadded and bucketed prefills, each judged
    against HF ``generate`` by the suite's rule. ``generate(model, ids, n)`` -> ``(tokens [1, n], logits)``;
    ``with_compile``: ``compile+graph`` too."""
    (ids,) = _inputs(model, 1, PROMPT_SEED)
    try:
        reference, reference_logits = generate(model, ids, NEW_TOKENS)
    except Exception as exc:   # noqa: BLE001 - transformers' own generate of the type
        return ZooOutcome(REFUSED, f"HF generate raises {first_line(exc)}: no reference to check a decode against",
                          info={"phase": EAGER_PHASE})
    info, outcomes, kept = {"prompt_tokens": PROMPT_TOKENS, "new_tokens": NEW_TOKENS}, {}, None
    try:
        fp64 = fp64_decode_logits(model, ids, reference)
    except Exception as exc:   # noqa: BLE001 - the model cannot run in float64
        fp64, info["note"] = None, f"no float64 reference ({first_line(exc)}): tokens compared"
    dtype = next(model.parameters()).dtype

    def judge(tokens, logits) -> tuple[bool, str]:
        """``(passed, sentence)``: the suite's rule, or identical tokens without float64 logits."""
        if fp64 is None:
            same = tokens.cpu().tolist() == reference.cpu().tolist()
            return same, ("tokens identical to generate (no float64 reference)" if same
                          else "tokens differ from generate (no float64 reference to judge a rounding tie)")
        result = check_decode_against_generate(tokens, logits, reference, reference_logits, fp64, dtype)
        return result.passed, result.summary

    use_graph = device != "cpu"
    for prefill, buckets in (("unpadded", None), ("bucketed", PREFILL_BUCKETS)):
        try:
            decoder = GreedyDecoder(model, CACHE_TOKENS, use_graph=use_graph, prefill_buckets=buckets)
            tokens, logits = decoder.generate(ids, NEW_TOKENS, return_logits=True)
        except Exception as exc:   # noqa: BLE001 - the model's own code on a static cache, or a fault of ours
            where = None if isinstance(exc, (NotGraphableError, CaptureError)) else model_code_line(exc)
            outcomes[prefill] = ((NOT_GRAPHABLE, str(exc)) if isinstance(exc, NotGraphableError)
                                 else (FAILED, first_line(exc)) if where is None
                                 else (NOT_GRAPHABLE, f"{type(model).__name__} does not run on a static KV cache: "
                                                      f"{first_line(exc)} at {where}"))
            continue
        passed, sentence = judge(tokens, logits)
        outcomes[prefill] = (PASSED if passed else FAILED, sentence)
        if passed and decoder.state_outside_cache:     # the CPU's eager decoder: a graph would refuse it
            outcomes[prefill] = (NOT_GRAPHABLE, state_outside_cache_reason(model, decoder.state_outside_cache))
        if not passed:   # the eager steps on the static cache (the CPU's decoder, or run again here) fail too?
            eager = _static_cache_differs(model, ids, buckets, judge) if use_graph else sentence
            if eager:
                outcomes[prefill] = (NOT_GRAPHABLE, f"{type(model).__name__}'s decode steps on the static KV cache a "
                                     f"graph needs differ from generate without any graph ({eager}): its own cache "
                                     "holds state a static cache does not reproduce")
        if prefill == "unpadded" and passed:
            kept = decoder
        else:
            decoder.close()
    info.update({f"{prefill}_prefill": {"status": s, "check": r} for prefill, (s, r) in outcomes.items()})
    status, reason = _decode_status(outcomes, device)
    if status == AWAITS_GPU:        # host work of a one-token forward: the GPU will likely refuse the step
        with contextlib.suppress(Exception):
            if found := meta_host_work(model, seq_len=1):
                note = (f"a one-token forward does host work a capture forbids ({found}): the GPU run will likely "
                        "refuse the step")
                reason = f"{reason}; {note}" if reason else note
    if status != MEASURED or kept is None:
        if kept is not None:
            kept.close()
        return ZooOutcome(status, reason, info)
    if with_compile:
        info["compile+graph"] = _compile_graph(model, ids, judge)
    return ZooOutcome(MEASURED, reason, info, timed=lambda: kept.generate(ids, NEW_TOKENS),
                      reference=lambda: plain_generate(model, ids, NEW_TOKENS), tokens_per_call=NEW_TOKENS,
                      close=kept.close)


def _static_cache_differs(model, ids, buckets, judge) -> str | None:
    """The eager steps' failed check on the static cache (the cache's fault), or None."""
    try:
        with GreedyDecoder(model, CACHE_TOKENS, use_graph=False, prefill_buckets=buckets) as decoder:
            tokens, logits = decoder.generate(ids, NEW_TOKENS, return_logits=True)
    except Exception:   # noqa: BLE001 - no eager verdict: the graph's failure stands
        return None
    passed, sentence = judge(tokens, logits)
    return None if passed else sentence


def plain_generate(model, ids, new_tokens: int):
    """HF ``generate(do_sample=False)`` as a user calls it: ``[1, L + new_tokens]`` int64."""
    import torch

    with torch.inference_mode():
        return model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=new_tokens,
                              eos_token_id=None, pad_token_id=0)


def _decode_status(outcomes: dict, device: str) -> tuple[str, str | None]:
    """Failed when either prefill failed, the unpadded one's refusal, else measured (CPU: awaiting a GPU)."""
    for prefill in ("unpadded", "bucketed"):
        status, sentence = outcomes[prefill]
        if status == FAILED:
            return FAILED, f"{prefill} prefill: {sentence}"
    status, sentence = outcomes["unpadded"]
    if status != PASSED:
        return status, sentence
    bucketed, why = outcomes["bucketed"]
    reason = f"bucketed prefill not graphable: {why}" if bucketed == NOT_GRAPHABLE else None
    return (MEASURED, reason) if device != "cpu" else (AWAITS_GPU, reason)


def _compile_graph(model, ids, judge) -> dict:
    """Judged like the graph and timed (ms per token, CUDA-event median of 3 requests); failures recorded."""
    try:
        with GreedyDecoder(model, CACHE_TOKENS, use_graph=True, compile_mode="default") as decoder:
            tokens, logits = decoder.generate(ids, NEW_TOKENS, return_logits=True)
            passed, sentence = judge(tokens, logits)
            timing = time_call(lambda: decoder.generate(ids, NEW_TOKENS), rounds=3, warmup=1)
            return {"status": PASSED if passed else FAILED, "check": sentence, "compile_ms": decoder.compile_ms,
                    "ms_per_token": statistics.median(timing.event_ms) / NEW_TOKENS}
    except Exception as exc:   # noqa: BLE001 - an optional variant: recorded with its reason
        return {"status": FAILED, "check": first_line(exc)}
