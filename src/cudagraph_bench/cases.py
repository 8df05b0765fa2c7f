"""The key of a measurement, and the names used in benchmark ``extra_info`` (no torch).

Every benchmark the plugin writes carries ``extra_info`` with at least ``suite`` and the fields of
its key, so tools that read a pytest-benchmark JSON never parse test names:

- suite ``forward``: ``model, dtype, seq_len, variant`` (+ ``batch``, ``cuda_event_ms`` list)
- suite ``decode``:  ``model, dtype, seq_len`` (prompt tokens), ``new_tokens``, ``variant``
- suite ``launch``:  ``n_launches``, ``variant``
"""

from __future__ import annotations

from dataclasses import dataclass

# The names are defined in :mod:`cudagraph_bench.options`; importable from here as the key's vocabulary.
from cudagraph_bench.options import DECODE_VARIANTS, DTYPES, FORWARD_VARIANTS, LAUNCH_VARIANTS  # noqa: F401


@dataclass(frozen=True, order=True)
class Case:
    """Key of one measured configuration (like ``torch.utils.benchmark``'s task spec).

    Attributes:
        model: preset name or model path, e.g. ``"gpt2"``.
        dtype: ``"float32"``, ``"bfloat16"`` or ``"float16"``.
        seq_len: prompt length in tokens (the real, unpadded length).
        variant: one of :data:`FORWARD_VARIANTS` (or a decode/launch variant for those suites).
    """

    model: str
    dtype: str
    seq_len: int
    variant: str

    @property
    def group(self) -> str:
        """pytest-benchmark group shared by all variants of one (model, dtype, seq_len)."""
        return f"{self.model} {self.dtype} L={self.seq_len}"

    @property
    def test_id(self) -> str:
        return f"{self.model}-{self.dtype}-L{self.seq_len}-{self.variant}"

    def without_variant(self) -> tuple[str, str, int]:
        return (self.model, self.dtype, self.seq_len)

    def extra_info(self) -> dict:
        """The key as stored in a benchmark's ``extra_info`` (suite ``forward``)."""
        return {"suite": "forward", "model": self.model, "dtype": self.dtype,
                "seq_len": self.seq_len, "variant": self.variant, "batch": 1}

    @classmethod
    def from_extra_info(cls, info: dict) -> "Case":
        """Inverse of :meth:`extra_info`. Raises ``KeyError`` when a field is missing."""
        return cls(str(info["model"]), str(info["dtype"]), int(info["seq_len"]), str(info["variant"]))
