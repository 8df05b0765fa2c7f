"""The session's replay proofs wait for the end of its timing (:class:`cudagraph_bench.plugin.session.ReplayProofs`):
nothing is built or profiled while cases are noted; afterwards each case is built again and proven, one model at a
time, its fields written into that case's own benchmark dict; a proof that shows no replay or raises fails that case's
recorded check and is listed, and the other proofs go on."""

from types import SimpleNamespace

from cudagraph_bench.cases import Case
from cudagraph_bench.plugin.session import ReplayProofs
from cudagraph_bench.results.record import decode_check
from cudagraph_bench.results.replay import replay_field, replay_problem
from cudagraph_bench.results.replay import ReplayCount


def replayed(launches, kernels):
    return {"replay": replay_field(ReplayCount(launches, kernels, 1), calls=1, expected_graph_launches=1,
                                   kernels_outside_allowed=0)}


class Log:
    """What the fakes were asked, in order."""

    def __init__(self):
        self.events = []

    def model(self, name, dtype):
        self.events.append(("model", name, dtype))
        return (name, dtype)

    def prepare(self, case, model):
        assert model == (case.model, case.dtype), "the case is built on its own model"
        self.events.append(("prepare", case.test_id))
        if case.seq_len == 99:
            raise RuntimeError("capture failed: operation not permitted when stream is capturing")
        return SimpleNamespace(case=case, close=lambda: self.events.append(("close", case.test_id)))

    def release(self):
        self.events.append(("release",))


def test_cases_are_proven_after_the_timing_one_model_at_a_time_into_their_own_benchmark():
    log = Log()
    counts = {16: (1, 0), 50: (0, 212), 128: (1, 3)}          # a replay, an eager call, kernels outside the graph
    proofs = ReplayProofs(log.prepare, log.model, lambda p: replayed(*counts[p.case.seq_len]))
    cases = [Case("gpt2", "float32", 16, "graph"), Case("bert-tiny", "float32", 50, "graph"),
             Case("gpt2", "float32", 128, "graph")]
    infos = [{"variant": "graph", "correct": True} for _ in cases]
    for case, info in zip(cases, infos):
        proofs.note(case, info, case.test_id)
    assert log.events == [] and all("replay" not in i for i in infos), "nothing is built or profiled while timing"
    proofs.run(log.release)
    models = [e[1] for e in log.events if e[0] == "model"]
    assert models == ["bert-tiny", "gpt2", "gpt2"], "the cases of one model are proven together"
    assert log.events.count(("release",)) == 3 and sum(e[0] == "close" for e in log.events) == 3
    for case, info in zip(cases, infos):
        launches, kernels = counts[case.seq_len]
        assert (info["replay"]["graph_launches"], info["replay"]["kernels_outside_graph"]) == (launches, kernels)
    assert [decode_check(i, "graph").status for i in infos] == ["pass", "fail", "fail"]
    assert [n for n, _ in proofs.failures] == [cases[1].test_id, cases[2].test_id]
    assert proofs.failures[0][1] == replay_problem(infos[1]["replay"]) and "ran eagerly" in proofs.failures[0][1]
    assert proofs.pending == []


def test_a_proof_that_raises_fails_its_case_and_the_others_are_proven():
    log = Log()
    proofs = ReplayProofs(log.prepare, log.model, lambda p: replayed(1, 0))
    bad, good = Case("gpt2", "bfloat16", 99, "graph"), Case("gpt2", "bfloat16", 16, "graph")
    bad_info, good_info = {"variant": "graph", "correct": True}, {"variant": "graph", "correct": True}
    proofs.note(bad, bad_info, "bad")
    proofs.note(good, good_info, "good")
    proofs.run(log.release)
    assert bad_info["status"] == "failed" and bad_info["reason"].startswith("replay proof raised: ")
    assert "operation not permitted when stream is capturing" in bad_info["reason"] and "replay" not in bad_info
    assert decode_check(bad_info, "graph").status == "fail"
    assert decode_check(good_info, "graph").status == "pass" and good_info["replay"]["graph_launches"] == 1
    assert proofs.failures == [("bad", bad_info["reason"])]
    assert log.events.count(("release",)) == 2, "released after the failed build too"
