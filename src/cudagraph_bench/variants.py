"""The variant registry (no torch): :data:`VARIANTS` says what every measured variant is; everything that depends on
which variant a case is, is a field of its :class:`Variant`. No other module names a variant with a string literal
(``tests/test_registry.py`` scans for one). In the spirit of vLLM's ``CUDAGraphMode``."""

from __future__ import annotations

import enum
import pkgutil
from dataclasses import dataclass

#: The suites a benchmark belongs to (its ``extra_info["suite"]``).
FORWARD, DECODE, LAUNCH = "forward", "decode", "launch"
SUITES = (FORWARD, DECODE, LAUNCH)


class Rule(enum.Enum):
    """How a variant's output is judged against its reference variant."""

    #: it is the reference of its suite: nothing to check.
    REFERENCE = "reference"
    #: the same kernels as its reference: any difference beyond the dtype's tolerance, or another token, is a bug.
    EXACT = "exact"
    #: other kernels: within the dtype's tolerance, or no farther from a float64 run than the reference (per step).
    FP64 = "fp64"


@dataclass(frozen=True)
class Variant:
    """One row of the registry. ``name``: stored in ``extra_info["variant"]`` and test ids; ``builder``:
    ``"module:callable"`` (imported only when a case is built); ``compiled``: measured only with ``--with-compile``;
    ``isolated``: ``run`` gives its cases a pytest process of their own; ``captured``: the memory ledger checks its
    graph pools are released; ``reference``: what it is checked against (None for the reference); ``gated``: the gate
    guards its latency; ``peer``: another project's path, failures xfail; ``lengths``: ``"pad_to"`` / ``"buckets"``
    (padded graphs) or None (the prompt's length)."""

    suite: str
    name: str
    builder: str
    needs_cuda: bool = True
    compiled: bool = False
    isolated: bool = False
    captured: bool = False
    reference: str | None = None
    rule: Rule = Rule.REFERENCE
    gated: bool = False
    peer: bool = False
    lengths: str | None = None

    @property
    def is_reference(self) -> bool:
        """Whether this is its suite's reference (eager, generate, the launch loop)."""
        return self.rule is Rule.REFERENCE

    @property
    def key(self) -> tuple[str, str]:
        return (self.suite, self.name)

    def build_callable(self):
        """Imported now: the registry itself imports no torch."""
        return pkgutil.resolve_name(self.builder)

    def __str__(self) -> str:
        return self.name


_F = "cudagraph_bench.measure.forward_variants"
_D = "cudagraph_bench.measure.decode_case"
_L = "cudagraph_bench.measure.launch_overhead:TinyKernelSequence"

#: Every variant, in display order within each suite.
VARIANTS: tuple[Variant, ...] = (
    Variant(FORWARD, "eager", f"{_F}:EagerVariant", needs_cuda=False),
    Variant(FORWARD, "graph", f"{_F}:GraphVariant", captured=True, reference="eager", rule=Rule.EXACT, gated=True),
    Variant(FORWARD, "padded", f"{_F}:PaddedVariant", captured=True, reference="eager", rule=Rule.FP64,
            lengths="pad_to"),
    Variant(FORWARD, "bucketed", f"{_F}:PaddedVariant", captured=True, reference="eager", rule=Rule.FP64,
            lengths="buckets"),
    Variant(FORWARD, "compile", f"{_F}:CompileVariant", compiled=True, isolated=True, reference="eager",
            rule=Rule.FP64),
    Variant(FORWARD, "compile+graph", f"{_F}:CompileGraphVariant", compiled=True, isolated=True, captured=True,
            reference="eager", rule=Rule.FP64),
    Variant(DECODE, "generate", f"{_D}:build_decoder", needs_cuda=False),
    Variant(DECODE, "static-eager", f"{_D}:build_decoder", needs_cuda=False, reference="generate", rule=Rule.FP64),
    Variant(DECODE, "graph", f"{_D}:build_decoder", captured=True, reference="static-eager", rule=Rule.EXACT),
    Variant(DECODE, "compile+graph", f"{_D}:build_decoder", compiled=True, isolated=True, captured=True,
            reference="static-eager", rule=Rule.FP64),
    Variant(DECODE, "generate-static-compile", f"{_D}:build_decoder", compiled=True, isolated=True,
            reference="generate", rule=Rule.FP64, peer=True),
    Variant(LAUNCH, "loop", _L),
    Variant(LAUNCH, "graph", _L, captured=True, reference="loop", rule=Rule.EXACT),
)

_BY_KEY = {v.key: v for v in VARIANTS}


def variant(suite: str, name: str) -> Variant:
    """KeyError (listing the suite's names) for no such variant."""
    try:
        return _BY_KEY[(suite, name)]
    except KeyError:
        raise KeyError(f"unknown {suite} variant {name!r}: use one of {', '.join(names(suite))}") from None


def find(suite: str, name) -> Variant | None:
    """None for a benchmark of an unknown or missing variant."""
    return _BY_KEY.get((suite, name))


def of_suite(suite: str, *, compiled: bool = True) -> tuple[Variant, ...]:
    """In display order; ``compiled=False`` leaves the torch.compile ones out."""
    return tuple(v for v in VARIANTS if v.suite == suite and (compiled or not v.compiled))


def names(suite: str, *, compiled: bool = True) -> tuple[str, ...]:
    """The names of :func:`of_suite`."""
    return tuple(v.name for v in of_suite(suite, compiled=compiled))


def reference_of(suite: str) -> Variant:
    """The reference variant of ``suite`` (eager, generate, loop)."""
    return next(v for v in VARIANTS if v.suite == suite and v.is_reference)


def exact_reference(suite: str) -> Variant | None:
    """Forward ``eager``, decode ``static-eager``, or None."""
    ref = next((v.reference for v in VARIANTS if v.suite == suite and v.rule is Rule.EXACT), None)
    return find(suite, ref)


def table_rank(suite: str, name) -> int:
    """The reference first, a peer right after, then display order (unknown names last)."""
    row = find(suite, name)
    if row is None:
        return 10_000
    return 0 if row.is_reference else 1 if row.peer else 2 + display_rank(suite, name)


def gated(suite: str = FORWARD) -> tuple[Variant, ...]:
    """The variants whose latency the gate guards (forward ``graph``)."""
    return tuple(v for v in VARIANTS if v.suite == suite and v.gated)


def display_rank(suite: str, name) -> int:
    """Unknown names last."""
    order = names(suite)
    return order.index(name) if name in order else len(order)


#: Forward variants of the benchmark matrix (``--variants``), in display order.
FORWARD_NAMES = names(FORWARD)
#: Forward variants that replay graphs captured at padded lengths (their own test module and prompt lengths).
PADDING_NAMES = tuple(v.name for v in of_suite(FORWARD) if v.lengths)
DECODE_NAMES = names(DECODE)
LAUNCH_NAMES = names(LAUNCH)
#: The forward reference (``eager``) and the variant the gate guards (``graph``).
FORWARD_REFERENCE = reference_of(FORWARD).name
GATED = gated()[0].name
#: The decode suite's reference (HF ``generate``).
DECODE_REFERENCE = reference_of(DECODE).name
#: The launch suite's reference (the loop) and its graph replay.
LAUNCH_REFERENCE = reference_of(LAUNCH).name
LAUNCH_GRAPH = next(v.name for v in of_suite(LAUNCH) if not v.is_reference)
