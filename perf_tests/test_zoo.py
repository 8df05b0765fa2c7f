"""The architecture zoo (collected only with ``--zoo``): every causal-LM model type of the installed transformers as
a tiny random checkpoint, its forward pass replayed from a graph against eager and its greedy decode with graphed
steps against HF ``generate`` (unpadded and bucketed prefill), or the reason it is refused or not graphable.

    pytest perf_tests/test_zoo.py --zoo all --benchmark-json out/zoo.json           # on a GPU
    pytest perf_tests/test_zoo.py --zoo all --device cpu --benchmark-json out/zoo-cpu.json   # what a CPU can tell

``cudagraph-bench zoo`` runs this module in watched processes and writes ``docs/architectures.md`` from the run.
The pipeline: :mod:`cudagraph_bench.plugin.zoo_tests`, :mod:`cudagraph_bench.measure.zoo_case`.
"""

from cudagraph_bench.plugin.zoo_tests import run_part
from cudagraph_bench.zoo_keys import DECODE, FORWARD


def test_zoo_forward(benchmark, cgb, zoo, request, zoo_type):
    run_part(cgb, zoo, benchmark, request, zoo_type, FORWARD)


def test_zoo_decode(benchmark, cgb, zoo, request, zoo_type):
    run_part(cgb, zoo, benchmark, request, zoo_type, DECODE)
