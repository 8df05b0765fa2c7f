"""The key of a measurement, one frozen dataclass per suite: every benchmark carries ``extra_info`` with ``suite`` and
its key's fields, so readers never parse test names; a benchmark of no suite is keyed by its test name. No torch."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import ClassVar

from cudagraph_bench import variants
from cudagraph_bench.options import DECODE_VARIANTS, DTYPES, FORWARD_VARIANTS, LAUNCH_VARIANTS  # noqa: F401 (shared)


class _SuiteKey:
    """What the keys of the suites share: their variant's registry row, and their fields as ``extra_info``."""

    suite: ClassVar[str]

    @property
    def variant_spec(self) -> variants.Variant:
        """The registry row of this case's variant; KeyError for a name the registry does not know."""
        return variants.variant(self.suite, self.variant)

    def without_variant(self) -> tuple:
        """The key's fields but the variant, in order (``(model, dtype, seq_len)`` for a forward case)."""
        return tuple(getattr(self, f.name) for f in fields(self) if f.name != "variant")

    def extra_info(self) -> dict:
        """The key as stored in a benchmark's ``extra_info``: ``suite``, the fields in order, ``batch`` 1."""
        return {"suite": self.suite, **asdict(self), "batch": 1}

    @classmethod
    def from_extra_info(cls, info: dict):
        """The key of a benchmark's ``extra_info``; KeyError, ValueError, TypeError: a field is missing or malformed."""
        return cls(**{f.name: (int if f.type == "int" else str)(info[f.name]) for f in fields(cls)})

    @property
    def label(self) -> str:
        """How messages and tables name the case, e.g. ``"gpt2 float32 L=16 graph"``."""
        return self._LABEL.format_map(vars(self))

    @property
    def group(self) -> str:
        """pytest-benchmark group shared by the variants of one request."""
        return self._GROUP.format_map(vars(self))

    @property
    def test_id(self) -> str:
        """The case's pytest parameter id."""
        return self._TEST_ID.format_map(vars(self))


@dataclass(frozen=True, order=True)
class Case(_SuiteKey):
    """Forward benchmark key: ``model`` (preset or path), ``dtype`` (``"float32"``, ``"bfloat16"``, ``"float16"``),
    ``seq_len`` (prompt tokens, unpadded), ``variant``."""

    suite: ClassVar[str] = variants.FORWARD

    _LABEL = "{model} {dtype} L={seq_len} {variant}"
    _GROUP = "{model} {dtype} L={seq_len}"
    _TEST_ID = "{model}-{dtype}-L{seq_len}-{variant}"

    model: str
    dtype: str
    seq_len: int
    variant: str


@dataclass(frozen=True, order=True)
class DecodeCase(_SuiteKey):
    """Decode benchmark key: ``seq_len`` (prompt tokens), ``new_tokens`` (per request), ``variant``."""

    suite: ClassVar[str] = variants.DECODE

    _LABEL = "{model} {dtype} L={seq_len} +{new_tokens} {variant}"
    _GROUP = "decode {model} {dtype} L={seq_len} new={new_tokens}"
    _TEST_ID = "{model}-{dtype}-L{seq_len}-new{new_tokens}-{variant}"

    model: str
    dtype: str
    seq_len: int
    new_tokens: int
    variant: str


@dataclass(frozen=True, order=True)
class LaunchCase(_SuiteKey):
    """Launch benchmark key: ``n_launches`` tiny kernels per round, ``variant`` (``loop`` or ``graph``)."""

    suite: ClassVar[str] = variants.LAUNCH

    _LABEL = "launch n={n_launches} {variant}"

    n_launches: int
    variant: str


@dataclass(frozen=True, order=True)
class OtherCase:
    """Key of a benchmark of no suite: its full test name; ``variant`` is None."""

    suite: ClassVar[str] = "other"
    variant: ClassVar[None] = None

    name: str

    @property
    def label(self) -> str:
        return self.name


#: suite -> the class of its key.
SUITE_CASES = {variants.FORWARD: Case, variants.DECODE: DecodeCase, variants.LAUNCH: LaunchCase}
#: suite -> the ``extra_info`` fields of its key, in the key's order.
SUITE_KEYS = {suite: tuple(f.name for f in fields(cls)) for suite, cls in SUITE_CASES.items()}
