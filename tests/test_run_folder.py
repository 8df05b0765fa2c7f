"""``cudagraph-bench run``'s ``-o`` folder keeps the earlier run or holds the new one whole: a run that wrote a run
JSON (even one whose every case failed) replaces every file of the earlier one, its plots and process parts
included; a run that measured nothing leaves the folder as it was, or unmade."""

import json
import shutil
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from cudagraph_bench.cli import main as cli_main
from cudagraph_bench.fsio import LOG_HEADER, figure_png
from cudagraph_bench.plugin.session import Session

PLOTS = ("latency_comparison.png", "speedup_vs_length.png")
QUICK = ("--device", "cpu", "--variants", "eager", "--dtypes", "float32")
#: ... and the round policy after ``--``, last on the command line.
ROUNDS = ("--", "--benchmark-min-rounds", "3", "--precision-pct", "0", "--benchmark-warmup-iterations", "1",
          "--warmup-ms", "0", "--min-time-ms", "0")
PLANTED = "planted: this case cannot be built"


def _files(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_folder_that_held_no_run_keeps_its_plots(tmp_path, capsys, in_process_pytest, tiny_gpt2_dir):
    """A report's folder (plots, no run.json) given as -o: the run adds its files and removes none of the others."""
    out = tmp_path / "report"
    out.mkdir()
    report_plot = out / "decode_bandwidth.png"
    report_plot.write_bytes(figure_png(Figure(figsize=(1, 1)), 10))           # drawn as a report draws its plots
    before = report_plot.read_bytes()
    assert cli_main(["run", *QUICK, "--models", tiny_gpt2_dir, "--prompt-lengths", "8", "-o", str(out), *ROUNDS]) == 0
    assert report_plot.read_bytes() == before and (out / "run.json").is_file()
    assert "removed" not in capsys.readouterr().err


def test_a_plot_named_file_the_tool_did_not_write_is_refused_before_anything_is_measured(tmp_path, capsys):
    """A PNG named like one of run's plots that no command of this tool drew: refused (exit 2, one line), kept."""
    out = tmp_path / "out"
    out.mkdir()
    Figure(figsize=(1, 1)).savefig(out / PLOTS[0], dpi=10)
    before = (out / PLOTS[0]).read_bytes()
    assert cli_main(["run", *QUICK, "--models", "gpt2", "--prompt-lengths", "8", "-o", str(out), *ROUNDS]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"-o {out} holds {PLOTS[0]}, which cudagraph-bench run did not write" in err
    assert (out / PLOTS[0]).read_bytes() == before and [p.name for p in out.iterdir()] == [PLOTS[0]]


def test_parts_that_belong_to_no_run_of_the_tool_are_refused_before_anything_is_measured(tmp_path, capsys,
                                                                                         in_process_pytest,
                                                                                         tiny_gpt2_dir):
    """parts/ of a folder without a run.json (the user's main.log), or beside the tool's run.json a log whose first
    line is not the tool's or a JSON there that is no run: refused (exit 2, one line), every file kept; a run's own
    parts are replaced (the test below)."""
    out = tmp_path / "out"
    (out / "parts").mkdir(parents=True)
    (out / "parts" / "main.log").write_text("the user's log\n")
    (out / "parts" / "notes.txt").write_text("never touched\n")
    before = _files(out)
    argv = ["run", *QUICK, "--models", tiny_gpt2_dir, "--prompt-lengths", "8", "-o", str(out), *ROUNDS]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"-o {out} holds {Path('parts', 'main.log')}, which belong to no run.json" in err
    assert _files(out) == before
    (out / "run.json").write_text('{"machine_info": {}, "benchmarks": []}')       # a run of the tool's
    before = _files(out)
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"holds {Path('parts', 'main.log')}, which belong to no run.json" in err
    assert _files(out) == before
    (out / "parts" / "main.log").write_text(f"{LOG_HEADER} main.json\n")            # the log of the tool's process
    (out / "parts" / "main.json").write_text('{"my": "settings"}')
    before = _files(out)
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"holds {Path('parts', 'main.json')}, which belong to no run.json" in err
    assert "remove that file first" in err and _files(out) == before


@pytest.mark.filterwarnings("ignore:Not saving anything")          # true: the failing session measured nothing
def test_a_run_whose_every_case_failed_replaces_the_earlier_run_whole(tmp_path, capsys, in_process_pytest,
                                                                      tiny_gpt2_dir, monkeypatch):
    out = tmp_path / "out"
    assert cli_main(["run", *QUICK, "--models", tiny_gpt2_dir, "--prompt-lengths", "8", "-o", str(out), *ROUNDS]) == 0
    assert all((out / name).is_file() for name in PLOTS)
    (out / "parts" / "isolated.log").write_text(f"{LOG_HEADER} isolated.json\n")   # an earlier process's log
    (out / "parts" / "notes.txt").write_text("the user's, not a run's\n")
    capsys.readouterr()

    def planted(self, case, model):
        raise RuntimeError(PLANTED)

    monkeypatch.setattr(Session, "_prepare", planted)
    assert cli_main(["run", *QUICK, "--models", tiny_gpt2_dir, "--prompt-lengths", "8", "-o", str(out), *ROUNDS]) == 1
    err = capsys.readouterr().err
    doc = json.loads((out / "run.json").read_text())
    (failure,) = doc["cudagraph_bench"]["failures"]
    assert not doc["benchmarks"] and PLANTED in failure["reason"]
    assert json.loads((out / "parts" / "main.json").read_text()) == doc
    assert sorted(p.name for p in (out / "parts").iterdir()) == ["main.json", "main.log", "notes.txt"]
    assert PLANTED in (out / "parts" / "main.log").read_text()
    assert not any((out / name).exists() for name in PLOTS)
    assert all(f"removed {out / name}: an earlier run's plot" in err for name in PLOTS)
    assert f"replaced {out / 'run.json'}" in err.splitlines()     # an earlier run was there
    assert f"replaced {out / 'parts'} (each pytest process's JSON and log)" in err.splitlines()


@pytest.mark.filterwarnings("ignore:Not saving anything")
def test_a_run_that_measured_nothing_makes_no_folder(tmp_path, capsys, in_process_pytest, tiny_gpt2_dir):
    out = tmp_path / "out"
    assert cli_main(["run", *QUICK, "--models", tiny_gpt2_dir, "--prompt-lengths", "100000", "-o", str(out), *ROUNDS]) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.endswith(f"nothing measured, {out} left as it was (exit 1)")
    logs = Path(last.split("see the logs under ", 1)[1].split(")", 1)[0])
    assert (logs / "main.log").is_file() and not out.exists()
    shutil.rmtree(logs.parent)


def test_a_write_that_fails_leaves_the_earlier_run_whole(tmp_path, capsys, in_process_pytest, tiny_gpt2_dir,
                                                         monkeypatch):
    from cudagraph_bench import fsio

    out = tmp_path / "out"
    assert cli_main(["run", *QUICK, "--models", tiny_gpt2_dir, "--prompt-lengths", "8", "-o", str(out), *ROUNDS]) == 0
    earlier = _files(out)
    real_replace = fsio.os.replace
    calls = []

    def full_disk_on_the_third(src, dst):
        calls.append(dst)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(fsio.os, "replace", full_disk_on_the_third)
    rc = cli_main(["run", *QUICK, "--models", tiny_gpt2_dir, "--prompt-lengths", "16", "-o", str(out), *ROUNDS])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(calls) == 3 and "No space left on device" in err[-1], err[-3:]
    assert _files(out) == earlier
