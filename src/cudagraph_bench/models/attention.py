"""The attention a model is measured with: its own default (SDPA where its class has it, else eager; eager for Gemma 2's
soft-capping), or ``--attn-implementation``'s."""

from __future__ import annotations

from cudagraph_bench.errors import UnknownModelError, UsageError
from cudagraph_bench.models.hf_internals import EAGER_ATTENTION, supports_attention, use_capture_safe_eager_mask
from cudagraph_bench.options import ATTN_IMPLEMENTATIONS


def installed_attention() -> tuple[str, ...]:
    """The implementations this environment can run (transformers' probes for flash and flex)."""
    import transformers.utils as utils

    probes = {"flash_attention_2": utils.is_flash_attn_2_available,
              "flex_attention": utils.is_torch_flex_attn_available}
    return tuple(name for name in ATTN_IMPLEMENTATIONS if name not in probes or probes[name]())


def check_attention_installed(requested: str | None) -> None:
    """UsageError (naming what is installed) when ``--attn-implementation`` cannot run here; None always passes."""
    if requested is not None and requested not in (installed := installed_attention()):
        raise UsageError(f"--attn-implementation {requested} is not installed here: use one of {', '.join(installed)} "
                         "(or leave it out: each model's own attention)")


def soft_capped(config) -> bool:
    """Attention logit soft-capping (Gemma 2), which SDPA cannot do."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return bool(getattr(text, "attn_logit_softcapping", None))


def supported_attention(model_class) -> tuple[str, ...]:
    """The implementations of :data:`~cudagraph_bench.options.ATTN_IMPLEMENTATIONS` ``model_class`` supports."""
    return tuple(name for name in ATTN_IMPLEMENTATIONS if supports_attention(model_class, name))


def default_attention(config, model_class=None) -> str:
    """``"eager"`` for soft-capping or a class without SDPA, else ``"sdpa"`` (``model_class`` None: assume SDPA)."""
    if soft_capped(config) or (model_class is not None and not supports_attention(model_class, "sdpa")):
        return "eager"
    return "sdpa"


def choose_attention(config, model_class=None, requested: str | None = None) -> str:
    """``requested``, or the model's own when None; eager registers the capture-safe eager mask. UnknownModelError when
    the class does not run ``requested``."""
    chosen = default_attention(config, model_class) if requested is None else requested
    if requested is not None and model_class is not None and requested not in supported_attention(model_class):
        import transformers

        raise UnknownModelError(f"{model_class.__name__} has no {requested} attention in transformers "
                                f"{transformers.__version__} (it runs {', '.join(supported_attention(model_class))}): "
                                f"choose one of those with --attn-implementation, or leave it out (its own: "
                                f"{default_attention(config, model_class)})")
    if requested == "sdpa" and soft_capped(config):
        raise UnknownModelError(f"{config.__class__.__name__} soft-caps its attention logits, which SDPA cannot do: "
                                "use --attn-implementation eager, or leave it out (its own: eager)")
    if chosen == EAGER_ATTENTION:
        use_capture_safe_eager_mask()
    return chosen


def attention_of(model) -> str | None:
    """``"sdpa"``, ``"eager"``, ..., or None."""
    value = getattr(getattr(model, "config", None), "_attn_implementation", None)
    return value if isinstance(value, str) else None
