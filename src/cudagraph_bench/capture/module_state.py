"""Decode state a model keeps in module attributes and rebinds every step (RecurrentGemma's ``recurrent_states``): every
replay of a captured step would start from the captured state."""

from __future__ import annotations


def _tensor_attributes(model) -> dict:
    """``(module path, attribute) -> tensor`` of public plain tensor attributes."""
    import torch

    return {(path, name): value for path, module in model.named_modules() for name, value in vars(module).items()
            if isinstance(value, torch.Tensor) and not name.startswith("_")}


def state_rebound_by_step(model, step) -> str | None:
    """Run ``step()`` (one eager decode step); the attributes whose tensor it replaced, or None."""
    before = _tensor_attributes(model)
    step()
    after = _tensor_attributes(model)
    rebound = sorted({f"{type(model.get_submodule(path)).__name__}.{name}"
                      for (path, name), tensor in after.items() if (path, name) in before
                      and before[path, name] is not tensor})
    return ", ".join(rebound) or None


def state_outside_cache_reason(model, rebound: str) -> str:
    """The one-line refusal of a graphed decode of ``model`` whose steps rebind ``rebound``."""
    return (f"{type(model).__name__} keeps decode state in module attributes that each step replaces ({rebound}) "
            "instead of updating in place: a graph's replays would all start from the state captured")
