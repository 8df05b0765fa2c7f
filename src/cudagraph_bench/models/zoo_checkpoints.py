"""A zoo type as a user's checkpoint: its tiny model saved with ``save_pretrained`` and put through the checks every
``--models`` folder passes (:func:`zoo_checkpoint`), or the reason it is refused, in one line."""

from __future__ import annotations

import os
import tempfile

from cudagraph_bench.errors import UnknownModelError
from cudagraph_bench.models.zoo_types import ZooBuildError


class ZooRefused(UnknownModelError):
    """A zoo type the suite does not measure; the message is the reason in one line (no folder in it)."""


def _without_path(reason: str, path: str) -> str:
    """``reason`` without the (temporary) ``path``."""
    prefix = f"{path}: "
    return reason[len(prefix):] if reason.startswith(prefix) else reason.replace(path, "<folder>")


def default_config_refusal(model_type: str) -> str | None:
    """Why :func:`~cudagraph_bench.models.checkpoints.directory_config` refuses ``model_type``'s default config,
    or None when it passes or cannot be built."""
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
    """Build ``model_type``'s tiny model, save it into ``folder/<model_type>`` and check that folder as
    ``--models`` checks a user's; returns its path (an encoder-decoder type: its causal-LM decoder alone).

    Raises:
        ZooRefused: why the suite does not measure the type (the tiny config or model does not build, or the
            suite's refusal of such a checkpoint), in one line."""
    from cudagraph_bench.models.checkpoints import directory_config
    from cudagraph_bench.models.refusals import check_model
    from cudagraph_bench.models.zoo_types import save_tiny_config, save_tiny_model, tiny_config, tiny_model
    from cudagraph_bench.models.zoo_overrides import REFUSED

    if model_type in REFUSED:
        raise ZooRefused(REFUSED[model_type])
    try:
        config = tiny_config(model_type)
    except ZooBuildError as exc:
        raise ZooRefused(default_config_refusal(model_type) or str(exc)) from None
    path = os.path.join(os.fspath(folder), model_type)
    try:
        save_tiny_config(model_type, folder, config)
        # an encoder-decoder type's causal-LM class (BartForCausalLM) is checked as a user's checkpoint of it
        if not getattr(config, "is_encoder_decoder", False):
            directory_config(path)
        save_tiny_model(model_type, folder, tiny_model(model_type, config))
        check_model(path, attn_implementation)
    except (ZooBuildError, UnknownModelError) as exc:
        raise ZooRefused(_without_path(str(exc), path)) from None
    return path
