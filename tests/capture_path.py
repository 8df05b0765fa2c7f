"""The host-work check of a capture, run on the CPU with a model on the ``meta`` device (the tests of architectures
and presets share it)."""

import torch


def meta_host_work(model, run, max_positions: int, *, constants=None):
    """The finding of the capture's host-work check of ``run`` (a forward of ``model``, on ``meta``): one warm-up
    call on the capture's code path, then the check itself (:func:`cudagraph_bench.capture.host_work.
    capture_path_host_work`); None when the forward does no host work."""
    from cudagraph_bench.capture.host_work import capture_path_host_work
    from cudagraph_bench.models.hf_internals import capture_code_path, static_rope_during_capture

    with torch.inference_mode():
        with capture_code_path(), static_rope_during_capture(model, max_positions):
            run()
        return capture_path_host_work(model, run, "meta", max_positions=max_positions, constants=constants)


def decode_steps_host_work(model, max_cache_len: int = 32, steps: int = 2):
    """:func:`meta_host_work` of ``steps`` decode steps of the suite's static-cache decoder (what a decode graph
    captures) on a ``meta`` model; returns ``(finding, decoder)``."""
    from cudagraph_bench.capture.decode import GreedyDecoder
    from cudagraph_bench.models.hf_internals import capture_code_path

    with torch.inference_mode(), capture_code_path():
        decoder = GreedyDecoder(model, max_cache_len, use_graph=False, prefill_buckets=(16,))

    def run_steps():
        decoder._rewind()
        decoder._run_steps(steps)

    return meta_host_work(model, run_steps, max_cache_len), decoder
