"""A zoo type as a user's checkpoint: saved and put through every ``--models`` check."""

from __future__ import annotations

import os
import tempfile

from cudagraph_bench.errors import UnknownModelError
from cudagraph_bench.models.zoo_types import ZooBuildError


class ZooRefused(UnknownModelError):
    """The one-line reason (no folder in it)."""


def _without_path(reason: str, path: str) -> str:
    prefix = f"{path}: "
    return reason[len(prefix):] if reason.startswith(prefix) else reason.replace(path, "<folder>")


def default_config_refusal(model_type: str) -> str | None:
    """Why ``directory_config`` refuses the type's default config, or None."""
    from transformers import CONFIG_MAPPING

    from cudagraph_bench.models.checkpoints import directory_config

    try:
        config = CONFIG_MAPPING[model_type]()
    except Exception:   # noqa: BLE001 - the build's reason is given instead
        return None
    with tempfile.TemporaryDirectory(prefix="cgb-zoo-") as folder:
        path = os.path.join(folder, model_type)
        try:
            config.save_pretrained(path)
            directory_config(path)
        except UnknownModelError as exc:
            return _without_path(str(exc), path)
        except Exception:   # noqa: BLE001 - not a refusal of the suite's
            return None
    return None


def zoo_checkpoint(model_type: str, folder: str | os.PathLike, *, attn_implementation: str | None = None) -> str:
    """Save the tiny model into ``folder/<model_type>`` and check it as ``--models`` would; returns the path (an
    encoder-decoder: its causal-LM decoder alone). ZooRefused with the one-line reason."""
    from cudagraph_bench.models.checkpoints import directory_config
    from cudagraph_bench.models.refusals import check_model
    from cudagraph_bench.models.zoo_types import save_tiny, tiny_config, tiny_model
    from cudagraph_bench.models.zoo_overrides import REFUSED

    if model_type in REFUSED:
        raise ZooRefused(REFUSED[model_type])
    try:
        config = tiny_config(model_type)
    except ZooBuildError as exc:
        raise ZooRefused(default_config_refusal(model_type) or str(exc)) from None
    path = os.path.join(os.fspath(folder), model_type)
    try:
        save_tiny(config, model_type, folder)
        if not getattr(config, "is_encoder_decoder", False):
            directory_config(path)
        save_tiny(tiny_model(model_type, config), model_type, folder)
        check_model(path, attn_implementation)
    except (ZooBuildError, UnknownModelError) as exc:
        raise ZooRefused(_without_path(str(exc), path)) from None
    return path
