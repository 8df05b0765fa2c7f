"""The GitHub workflows: valid against the workflow schema, audited by zizmor, and shaped as documented.

check-jsonschema and zizmor come with the project's ``[dev]`` extra and run offline.
"""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.transformers_free

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = [ROOT / ".github" / "workflows" / "ci.yml", ROOT / ".github" / "workflows" / "gpu-perf.yml"]


def tool(name):
    """Path of a console script: next to this interpreter (the venv) or on PATH; skip when absent."""
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[dev]')")
    return found


def load(path):
    return yaml.safe_load(path.read_text())


def steps(doc):
    return [s for job in doc["jobs"].values() for s in job["steps"]]


def test_workflows_match_the_github_workflow_schema():
    proc = subprocess.run([tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows",
                           *map(str, WORKFLOWS)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_zizmor_offline_has_no_high_findings():
    proc = subprocess.run([tool("zizmor"), "--offline", "--format", "json", *map(str, WORKFLOWS)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 10, 11, 12, 13, 14), proc.stderr  # 1x: findings of some severity
    findings = json.loads(proc.stdout)
    high = [f for f in findings if f["determinations"]["severity"].lower() == "high"]
    assert high == [], json.dumps(high, indent=1)[:3000]


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_actions_are_pinned_and_credentials_not_persisted(path):
    doc = load(path)
    assert doc["permissions"] == {"contents": "read"}
    for step in steps(doc):
        if "uses" in step:
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", step["uses"]), step["uses"]
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False
    # every `uses:` line says which release its SHA is
    for line in path.read_text().splitlines():
        if "uses:" in line:
            assert re.search(r"@[0-9a-f]{40} # v\d+\.\d+\.\d+$", line), line
    # no ${{ }} expression inside shell scripts (template injection): values go through env
    for step in steps(doc):
        assert "${{" not in step.get("run", ""), step["run"]


def test_gpu_perf_matrix_runners_concurrency_gate_and_artifacts():
    doc = load(WORKFLOWS[1])
    job = doc["jobs"]["perf"]
    gpus = job["strategy"]["matrix"]["gpu"]
    assert gpus and job["strategy"]["fail-fast"] is False
    assert job["runs-on"][:3] == ["self-hosted", "linux", "gpu"] and job["runs-on"][3] == "${{ matrix.gpu }}"
    assert "${{ matrix.gpu }}" in job["concurrency"]["group"] and job["concurrency"]["cancel-in-progress"] is False
    runs = [s.get("run", "") for s in job["steps"]]
    assert any(r.strip() == "nvidia-smi" for r in runs)
    gate = next(r for r in runs if "make gpu-gate" in r)
    assert "--baseline baselines/$GPU.json" in gate and "--markdown $REPORT" in gate
    assert job["env"]["GPU"] == "${{ matrix.gpu }}"
    summary = next(s for s in job["steps"] if "GITHUB_STEP_SUMMARY" in s.get("run", ""))
    upload = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert summary["if"] == "always()" and upload["if"] == "always()"
    assert "out/" in upload["with"]["path"] and ".benchmarks/" in upload["with"]["path"]
    for gpu in gpus:
        assert re.fullmatch(r"[a-z0-9-]+", gpu), "matrix entries are GPU slugs (envinfo.gpu_slug)"


def test_gpu_ab_job_compares_base_and_head_on_the_perf_jobs_gpu():
    doc = load(WORKFLOWS[1])
    perf, ab = doc["jobs"]["perf"], doc["jobs"]["ab"]
    assert "pull_request" in ab["if"] and ab["needs"] == "perf"
    assert ab["runs-on"] == perf["runs-on"] and ab["strategy"]["matrix"] == perf["strategy"]["matrix"]
    assert ab["concurrency"]["group"] == perf["concurrency"]["group"]  # never two perf jobs on one GPU
    checkout = next(s for s in ab["steps"] if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 0  # the base commit must be there for `git worktree add`
    run = next(s["run"] for s in ab["steps"] if "cudagraph-bench ab" in s.get("run", ""))
    assert '--base "$BASE_SHA"' in run and "--head HEAD" in run and "-k 5" in run


def test_ci_runs_the_cpu_tests_on_a_hosted_runner():
    doc = load(WORKFLOWS[0])
    (job,) = doc["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest"
    assert any(s.get("run", "").strip() == "bash .ci/run" for s in job["steps"])


def test_make_gpu_gate_target_exists():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^gpu-gate:", makefile, re.M) and "--benchmark-json" in makefile
    assert re.search(r"^setup: \$\(VENV\)/\.installed", makefile, re.M)  # the workflow's set-up step `make setup`


def test_make_gpu_gate_runs_every_benchmark_then_every_correctness_test_then_a_confirmed_gate():
    """The GPU CI command: the benchmarks alone in one session (a quiet GPU, the run JSON), then every other test of
    perf_tests in a second session over xdist workers, as make test runs them (together: every test of perf_tests,
    with the same PYTEST_ARGS), then the gate with confirmation reruns; a failed test in either session fails the
    target even when the gate passes."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^gpu-gate:.*?(?=^\S)", makefile, re.M | re.S).group(0)
    lines = [line for line in recipe.splitlines() if "-m pytest" in line]
    assert len(lines) == 2
    bench, tests = lines
    assert "perf_tests --benchmark-only" in bench and "--benchmark-json" in bench
    assert "perf_tests --benchmark-skip" in tests and "--benchmark-json" not in tests
    assert recipe.count("$(PYTEST_ARGS)") == 2 and '-n $(TEST_WORKERS) --dist loadgroup' in recipe
    assert recipe.index("--benchmark-only") < recipe.index("--benchmark-skip") < recipe.index("cudagraph_bench gate")
    assert "cudagraph_bench gate $(RUN_JSON) --confirm $(CONFIRM)" in recipe
    assert re.search(r"if \[ \$\$rc -ne 0 \] \|\| \[ \$\$trc -ne 0 \].*exit 1", recipe, re.S)


def test_make_targets_list_failures_and_errors_with_the_skips():
    """``-rs`` alone replaces pytest's default ``-rfE``: a make test that failed then named no failed test in
    its summary, only the skips. Every pytest line of the Makefile that selects summary chars keeps f and E."""
    makefile = (ROOT / "Makefile").read_text()
    pytest_lines = [line for line in makefile.splitlines() if "-m pytest" in line]
    assert len(pytest_lines) >= 3                                   # bench, test, gpu-gate
    for line in pytest_lines:
        for chars in re.findall(r"(?<!\S)-r(\w+)", line):
            assert {"f", "E", "s"} <= set(chars), line


def test_the_readme_commands_run_in_the_venv_that_make_installs():
    """After ``make test`` or ``make bench`` the README's ``cudagraph-bench`` and ``pytest`` lines work as printed:
    the README activates the venv the Makefile installs (its ``VENV`` default) before its first such line, and the
    venv holds the ``cudagraph-bench`` console script (pyproject's) and pytest (the dev extra)."""
    import tomllib

    readme = (ROOT / "README.md").read_text()
    makefile = (ROOT / "Makefile").read_text()
    venv = re.search(r"^VENV \?= (\S+)$", makefile, re.M).group(1)
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.S)
    lines = [line.strip() for block in blocks for line in block.splitlines() if line.strip()]
    activate = next(i for i, line in enumerate(lines) if line.startswith(f". {venv}/bin/activate"))
    first = next(i for i, line in enumerate(lines) if line.startswith(("cudagraph-bench ", "pytest ")))
    assert activate < first
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "cudagraph-bench" in project["scripts"]
    assert any(dep.startswith("pytest") for dep in project["optional-dependencies"]["dev"])
    assert re.search(r'pip install -q \$\(PIP_ARGS\) -e "\.\[dev\]"', makefile)  # the package and the dev extra
