"""The decode checks' references, once per session and prompt: HF ``generate``'s tokens and logits, the eager
static-cache loop's, and the float64 logits of the rounding-tie rule."""

from __future__ import annotations

from typing import Callable


def generate_reference(model, input_ids, new_tokens: int):
    """HF ``generate(do_sample=False, eos_token_id=None)`` after ``input_ids [1, L]`` int64: tokens ``[1, new_tokens]``
    int64 and a tuple of ``new_tokens`` logits ``[1, vocab]``."""
    import torch

    with torch.inference_mode():
        out = model.generate(input_ids, attention_mask=torch.ones_like(input_ids), do_sample=False,
                             max_new_tokens=new_tokens, eos_token_id=None, pad_token_id=0,
                             return_dict_in_generate=True, output_logits=True)
    return out.sequences[:, input_ids.shape[1]:], out.logits


class DecodeReferences:
    """``model(name, dtype)`` gives the session's model, ``positions(name)`` its position limit (tokens)."""

    def __init__(self, model: Callable, positions: Callable[[str], int]):
        self._model, self._positions = model, positions
        self._generated, self._static_eager, self._fp64 = {}, {}, {}    # each reference by its key, computed once

    def generate(self, name: str, dtype: str, input_ids, new_tokens: int, *, share_up_to: int = 0):
        """As :func:`generate_reference`, from one shared request per prompt: a shorter one is its prefix."""
        key = (name, dtype, tuple(input_ids.flatten().tolist()))
        room = self._positions(name) - input_ids.shape[1]
        longest = max(new_tokens, min(share_up_to, room))
        if key not in self._generated or self._generated[key][0].shape[1] < new_tokens:
            self._generated[key] = generate_reference(self._model(name, dtype), input_ids, longest)
        tokens, logits = self._generated[key]
        return tokens[:, :new_tokens], logits[:new_tokens]

    def static_eager(self, name: str, dtype: str, input_ids, new_tokens: int, max_cache_len: int, decoder=None):
        """Tokens ``[1, new_tokens]`` int64 and logits of the eager static-cache loop (``decoder``, or a fresh one of
        ``max_cache_len``) after ``input_ids [1, L]``, computed once: the graphed decoders' exact reference."""
        from cudagraph_bench.capture.decode import GreedyDecoder

        key = (name, dtype, tuple(input_ids.flatten().tolist()), new_tokens, max_cache_len)
        if key not in self._static_eager:
            own = decoder is None
            decoder = decoder or GreedyDecoder(self._model(name, dtype), max_cache_len, use_graph=False)
            try:
                self._static_eager[key] = decoder.generate(input_ids, new_tokens, return_logits=True)
            finally:
                if own:
                    decoder.close()
        return self._static_eager[key]

    def fp64_logits(self, name: str, dtype: str, input_ids, tokens):
        """``[n, vocab]`` float64 for ``tokens [1, n]`` after ``input_ids [1, L]``, computed once; prefixes of the
        ``generate`` reference are answered from its logits."""
        from cudagraph_bench.measure.correctness import fp64_decode_logits

        prompt = tuple(input_ids.flatten().tolist())
        n = tokens.shape[1]
        generated = self._generated.get((name, dtype, prompt))
        if generated is not None and generated[0].shape[1] > n and generated[0][0, :n].tolist() == tokens[0].tolist():
            tokens = generated[0]          # the start of the whole reference: its logits, sliced
        key = (name, dtype, prompt, tuple(tokens.flatten().tolist()))
        if key not in self._fp64:
            self._fp64[key] = fp64_decode_logits(self._model(name, dtype), input_ids, tokens)
        return self._fp64[key][:n]
