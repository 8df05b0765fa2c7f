"""Every recorded correctness check is in the verdict of gate, compare and baseline, whatever the variant or
suite; a known failure of a peer's code is reported with its reason and fails none of them.

The runs are the committed H200 runs: the default suite on one GPU (forward graph, padded, bucketed; decode
generate, static-eager, graph), the fused decode of tinyllama-1.1b (its compile+graph benchmark and the
failure of HF's static-cache compile path as recorded) and a compile sweep (forward compile, compile+graph).
A temporary copy flips one recorded check to failed."""

import json
import re

import pytest

from h200_fixture import copy_doc, committed_doc, committed_run, no_default_baseline_fixture, run_cli, write

from cudagraph_bench.cases import SUITE_CASES
from cudagraph_bench.results.noise import MIN_BASELINE_RUNS

pytestmark = pytest.mark.transformers_free

SUITE = committed_doc("suite-one-gpu")
FUSED = committed_doc("decode-fused-tuned-tinyllama")
COMPILE = committed_doc("compile-sweep")
#: the failure of HF's static-cache torch.compile path (``generate-static-compile``) as the fused run recorded it
(PEER_FAILURE,) = FUSED["cudagraph_bench"]["failures"]


@pytest.fixture(autouse=True)
def no_default_baseline(tmp_path, monkeypatch):
    return no_default_baseline_fixture(tmp_path, monkeypatch)


def first(doc, suite, variant):
    """The first benchmark of ``suite`` and ``variant`` in a run document."""
    return next(b for b in doc["benchmarks"] if b["extra_info"].get("suite") == suite
                and b["extra_info"]["variant"] == variant)


def label(info):
    """The case's label as the suite's key class writes it (e.g. ``gpt2 bfloat16 L=50 +64 graph``)."""
    return SUITE_CASES[info["suite"]].from_extra_info(info).label


def names(case, text):
    """Whether ``text`` names ``case`` as a whole (``gpt2 ...`` is not named by ``distilgpt2 ...``)."""
    return re.search(rf"(?<![\w.-]){re.escape(case)}", text) is not None


def with_compile(failures=()):
    """The default suite run with the fused run's decode compile+graph benchmark and ``failures`` added: what a
    ``--with-compile`` session of the same code on the same GPU records."""
    doc = copy_doc(SUITE)
    doc["benchmarks"].append(copy_doc(first(FUSED, "decode", "compile+graph")))
    doc.setdefault("cudagraph_bench", {})["failures"] = [copy_doc(f) for f in failures]
    return doc


def flip_forward(base, variant):
    def make():
        clean = copy_doc(base)
        bad = copy_doc(clean)
        info = first(bad, "forward", variant)["extra_info"]
        info.update(correct=False)
        return clean, bad, label(info), f"check {info['check']}"
    return make


def flip_decode(variant, **fields):
    def make():
        clean = with_compile()
        bad = copy_doc(clean)
        info = first(bad, "decode", variant)["extra_info"]
        info.update(fields)
        words = f"check {info['check']}" if info.get("correct") is False else "check vs generate failed"
        return clean, bad, label(info), words
    return make


def unmeasured_compile_graph():
    """The decode compile+graph case raised and was recorded as failed (the recorded failure's reason), not measured."""
    clean = with_compile()
    clean["benchmarks"].remove(first(clean, "decode", "compile+graph"))
    bad = copy_doc(clean)
    entry = {**copy_doc(PEER_FAILURE), "variant": "compile+graph"}
    bad["cudagraph_bench"]["failures"] = [entry]
    return clean, bad, label({**entry, "suite": "decode"}), entry["reason"]


FLIPS = {
    "forward padded": flip_forward(SUITE, "padded"),
    "forward bucketed": flip_forward(SUITE, "bucketed"),
    "forward compile": flip_forward(COMPILE, "compile"),
    "forward compile+graph": flip_forward(COMPILE, "compile+graph"),
    "decode graph": flip_decode("graph", correct=False, status="mismatch",
                                reason="graphed decode tokens differ from the eager static-cache loop's"),
    "decode compile+graph": flip_decode("compile+graph", correct=False, static_eager_check_passed=False,
                                        status="mismatch", reason="token 3 differs from static-eager's"),
    "decode static-eager vs generate": flip_decode("static-eager", generate_check_passed=False,
                                                   matches_generate=False,
                                                   generate_check="token 9 differs from generate's, not a tie"),
    "decode compile+graph not measured": unmeasured_compile_graph,
}


def copies(doc, folder, n):
    """``n`` separate runs of ``doc`` (their own datetime, so their own bytes)."""
    return [write({**doc, "datetime": f"2030-01-{i + 1:02d}T00:00:00"}, folder / f"run-{i + 1}.json") for i in range(n)]


@pytest.mark.parametrize("case", FLIPS)
def test_a_failed_check_of_any_variant_fails_gate_compare_and_baseline(tmp_path, capsys, case):
    clean, bad, name, check = FLIPS[case]()
    old, new = write(clean, tmp_path / "old.json"), write(bad, tmp_path / "new.json")

    rc, out, err = run_cli(capsys, "gate", new, "--baseline", "none")
    line = out.splitlines()[-1]
    assert rc == 1 and line.startswith("gate FAIL: ") and names(name, line) and check in line, (err, line)
    assert run_cli(capsys, "gate", old, "--baseline", "none")[0] == 0      # the flip alone fails it

    rc, out, _ = run_cli(capsys, "compare", old, new)
    assert rc == 1 and names(name, out.splitlines()[-1]) and check in out.splitlines()[-1]

    runs = [*copies(clean, tmp_path / "runs", MIN_BASELINE_RUNS - 1), new]
    made = tmp_path / "baseline.json"
    rc, out, err = run_cli(capsys, "baseline", *runs, "-o", made)
    assert rc == 1 and out == "" and len(err.splitlines()) == 1 and not made.exists()
    assert names(name, err) and check in err and str(new) in err


def test_a_check_that_failed_on_both_sides_still_fails_compare(tmp_path, capsys):
    _, bad, name, _ = FLIPS["decode graph"]()
    old = write(bad, tmp_path / "old.json")
    new = write({**bad, "datetime": "2030-01-01T00:00:00"}, tmp_path / "new.json")
    rc, out, _ = run_cli(capsys, "compare", old, new)
    assert rc == 1 and "as in OLD" in out.splitlines()[-1] and names(name, out.splitlines()[-1])
    assert "WRONG (in OLD and NEW)" in next(line for line in out.splitlines() if names(name, line))


def test_a_known_peer_failure_is_reported_with_its_reason_and_fails_nothing(tmp_path, capsys):
    run = with_compile([PEER_FAILURE])
    path = write(run, tmp_path / "run.json")
    peer = label({**PEER_FAILURE, "suite": "decode"})
    reason = PEER_FAILURE["reason"]

    rc, out, _ = run_cli(capsys, "gate", path, "--baseline", "none")
    line = out.splitlines()[-1]
    assert rc == 0 and line.startswith("gate PASS: ") and "1 known peer failure" in line
    assert names(peer, line) and reason in line

    old = write(with_compile(), tmp_path / "old.json")
    rc, out, _ = run_cli(capsys, "compare", old, path)
    assert rc == 0 and "1 known peer failure in NEW" in out.splitlines()[-1] and reason in out.splitlines()[-1]

    made = tmp_path / "baseline.json"
    rc, _, err = run_cli(capsys, "baseline", *copies(run, tmp_path / "runs", MIN_BASELINE_RUNS), "-o", made)
    assert rc == 0 and made.exists(), err
