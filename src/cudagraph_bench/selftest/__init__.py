"""The gate's self-test (``cudagraph-bench selftest``, docs/gate.md), one feature in one folder: the faults it plants
(:mod:`.faults`, :mod:`.eager_layer`; in the pytest process, the measure layer), its runs (:mod:`.planned_runs`; the
runner layer), its verdicts (:mod:`.verdicts`, :mod:`.ab_verdicts`; the results layer, no torch) and its command
(:mod:`.command`). Each module keeps the layer of what it does; tests/test_layout.py holds them to it."""
