"""The commands a user runs: check, gate, baseline, merge, run --resume, bisect, --help."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.cli import build_parser, main
from conformance.results import report
from conformance.results.verdict import Verdict

ROOT = Path(__file__).resolve().parent.parent
CONFORMANCE = [sys.executable, "-m", "conformance"]


def run_cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([*CONFORMANCE, *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize("command", [None, "run", "check", "gate", "baseline", "bisect",
                                     "merge", "versions", "fixtures", "exec", "known"])
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([command, "--help"] if command else ["--help"])
    assert exit_.value.code == 0
    assert "usage: conformance" in capsys.readouterr().out


def test_check_rejects_a_folder_that_is_not_a_checkpoint(tmp_path, capsys):
    assert main(["check", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {tmp_path} is not a checkpoint folder (no config.json in it)"


def test_check_rejects_a_missing_hub_id_offline_in_one_line(capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["check", "nobody-here/not-a-model"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "HF_HUB_OFFLINE is set" in err[0]


@pytest.mark.model
def test_check_gives_a_verdict_table_for_a_fixture_folder(tmp_path):
    """Every check, the model checks included; the fixture's own findings apply (by
    architecture), and known ones are listed apart from what to fix."""
    from conformance.checks import check_ids
    from fixtures.build import build_fixture

    path = build_fixture("llava")
    out = run_cli("check", str(path), "--output", str(tmp_path))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "LlavaForConditionalGeneration" in out.stdout and "oracle native vLLM" in out.stdout
    assert "known findings: those of fixture llava" in out.stdout
    assert "check         subject       verdict  cases  finding" in out.stdout
    cells = json.loads((tmp_path / "results.json").read_text())["cells"]
    assert {c["check"] for c in cells} == set(check_ids())
    assert {c["status"] for c in cells if c["check"] in ("model", "encoder", "generate")} == {
        "pass"}
    assert "Known backend limitations" in out.stdout and "What to fix" not in out.stdout
    assert (tmp_path / "report.html").exists()


def write(path: Path, cells: list[Verdict]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    report.write_results(path / "results.json", cells, {})
    return path / "results.json"


def test_gate_exits_non_zero_naming_a_planted_regression(tmp_path):
    baseline, _ = report.read_results(ROOT / "reports" / "baseline.json")
    passing = next(v for v in baseline if v.status == "pass")
    current = [Verdict(**v.__dict__) for v in baseline]
    for v in current:
        if v.key == passing.key:
            v.status, v.detail = "fail", "planted: prompt ids differ at position 3"
    ok = run_cli("gate", str(write(tmp_path / "same", baseline)))
    assert ok.returncode == 0, ok.stdout
    bad = run_cli("gate", str(write(tmp_path / "planted", current)))
    assert bad.returncode == 1
    assert "REGRESSIONS (1)" in bad.stdout and passing.key.label() in bad.stdout
    assert "planted: prompt ids differ at position 3" in bad.stdout


def test_gate_lets_a_newly_known_cell_through_only_when_accepted(tmp_path, capsys):
    was = Verdict("gemma3", "5.17.0", "placeholders", "pass")
    now = Verdict("gemma3", "5.17.0", "placeholders", "xfail", "r [observed: ids differ]",
                  finding="gemma3-offsets-newlines")
    base = ["--baseline", str(write(tmp_path / "base", [was]))]
    run = str(write(tmp_path / "now", [now]))
    assert main(["gate", run, *base]) == 1
    assert "compared 1 cell with the baseline (0 only in this run" in capsys.readouterr().out
    assert main(["gate", run, *base, "--accept", "another", "--accept",
                 "gemma3-offsets-newlines"]) == 0
    assert main(["gate", run, *base, "--accept", "*"]) == 0
    assert "NEWLY KNOWN, accepted (1)" in capsys.readouterr().out


def test_baseline_is_refreshed_by_an_explicit_command(tmp_path):
    repro = ROOT / "reports" / "repro" / "llava-impl-errors-0.py"
    cells = [Verdict("llava", "5.17.0", "cache", "pass", subject="impl"),
             Verdict("llava", "5.17.0", "errors", "fail", "bare assert", subject="impl",
                     data={"reproducer": str(repro)}, log="logs/llava-errors.log")]
    out = run_cli("baseline", str(write(tmp_path / "run", cells)), "--output",
                  str(tmp_path / "baseline.json"))
    assert out.returncode == 0
    written = json.loads((tmp_path / "baseline.json").read_text())
    assert [c["status"] for c in written["cells"]] == ["pass", "fail"]
    # committed: no folder of this machine in it
    assert written["meta"]["baseline_of"] == "run"
    assert written["cells"][1]["data"]["reproducer"] == "reports/repro/llava-impl-errors-0.py"
    assert "log" not in written["cells"][1]  # one run's file, never committed


def test_merge_combines_shards(tmp_path):
    one = write(tmp_path / "1", [Verdict("llava", "5.17.0", "cache", "pass", subject="impl")])
    two = write(tmp_path / "2", [Verdict("gemma3", "5.17.0", "cache", "fail", subject="impl",
                                         data={"reproducer": "repro/gemma3.py"},
                                         log="logs/gemma3.log")])
    out = run_cli("merge", str(one), str(two), "--output", str(tmp_path / "merged"))
    assert out.returncode == 1, out.stderr  # the failing cell
    merged, _ = report.read_results(tmp_path / "merged")
    assert {v.fixture for v in merged} == {"llava", "gemma3"}
    assert (tmp_path / "merged" / "report.md").exists()
    # a shard's paths, relative to its folder, now point there from the merged folder
    failing = next(v for v in merged if v.fixture == "gemma3")
    assert (failing.data["reproducer"], failing.log) == ("../2/repro/gemma3.py",
                                                         "../2/logs/gemma3.log")


def test_a_baseline_merged_with_a_run_keeps_its_paths(tmp_path):
    """A baseline's paths are relative to the repository root, not to its file's folder:
    merging it with a run and recording the baseline again leaves them as they were (they
    used to gain a `../` level each time)."""
    repro = ROOT / "reports" / "repro" / "llava-impl-errors-0.py"
    base = tmp_path / "baseline.json"
    assert run_cli("baseline", str(write(tmp_path / "run", [Verdict(
        "llava", "5.17.0", "errors", "fail", "bare assert", subject="impl",
        data={"reproducer": str(repro)})])), "--output", str(base)).returncode == 0
    more = write(tmp_path / "more", [Verdict("gemma3", "5.17.0", "cache", "pass",
                                             subject="impl")])
    run_cli("merge", str(base), str(more), "--output", str(tmp_path / "merged"))
    again = tmp_path / "again.json"
    assert run_cli("baseline", str(tmp_path / "merged"), "--output", str(again)).returncode == 0
    cells = {c["fixture"]: c for c in json.loads(again.read_text())["cells"]}
    assert cells["llava"]["data"]["reproducer"] == "reports/repro/llava-impl-errors-0.py"
    # one outside the repository (a scratch run folder's) is named by its file alone
    elsewhere = write(tmp_path / "scratch", [Verdict(
        "gemma3", "5.17.0", "errors", "fail", "x", subject="impl",
        data={"reproducer": str(tmp_path / "scratch" / "repro" / "g.py")})])
    assert run_cli("baseline", str(elsewhere), "--output", str(again)).returncode == 0
    assert json.loads(again.read_text())["cells"][0]["data"]["reproducer"] == "g.py"


@pytest.mark.vllm
@pytest.mark.e2e
def test_a_killed_run_resumes_without_redoing_finished_cells(tmp_path):
    # 6 cells in one worker: it is killed after the first verdict, and the resumed run's worker
    # runs only the others
    args = [*CONFORMANCE, "run", "--vllm", "0.31.0", "--fixtures", "llava,qwen2_5_vl,gemma3",
            "--versions", "5.17.0", "--checks", "prompt-ids", "--subjects", "impl,vllm-backend",
            "--jobs", "1", "--output", str(tmp_path)]
    process = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    partial = tmp_path / "results.jsonl"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and not (partial.exists() and partial.read_text().strip()):
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    before = report.read_partial(partial)
    assert 1 <= len(before) < 6
    resumed = subprocess.run([*args, "--resume"], cwd=ROOT, capture_output=True, text=True,
                             timeout=900)
    assert resumed.returncode == 0, resumed.stdout[-2000:]
    assert "already done" in resumed.stdout
    after = report.read_partial(partial)
    assert len(after) == 6 and after[:len(before)] == before
    assert len({v.key for v in after}) == 6


@pytest.mark.vllm
@pytest.mark.e2e
def test_bisect_finds_the_first_release_of_a_planted_version_dependent_fault():
    # two releases, each probed in its own worker (a worker's start is most of the time);
    # the search itself is tested with a fake probe (tests/test_bisect.py)
    out = run_cli("bisect", "--arch", "llava", "--check", "placeholders", "--good", "5.16.0",
                  "--bad", "5.16.1", "--versions", "5.16.0,5.16.1",
                  "--fault", "offset-shift>=5.16.1", timeout=1800)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "first bad release: transformers 5.16.1 (last good 5.16.0)" in out.stdout
    assert "ranges differ" in out.stdout  # the evidence on the bad side


@pytest.mark.vllm
@pytest.mark.e2e
def test_a_run_tests_the_vllm_of_an_environment_given_by_its_interpreter(tmp_path):
    # as in vLLM's CI: the environment that has vLLM runs the workers, its cells labelled with
    # its vLLM and folder; the verdicts are the release's (this environment holds vLLM 0.31.0)
    python = Path(sys.executable)
    run = subprocess.run([*CONFORMANCE, "run", "--python", str(python), "--fixtures", "llava",
                          "--versions", "5.17.0", "--checks", "placeholders,prompt-ids",
                          "--subjects", "vllm-backend", "--output", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    label = f"0.31.0@{python.parent.parent.name}"
    assert f"vLLM under test: vLLM {label} (the environment of {python})" in run.stdout
    verdicts, _ = report.read_results(tmp_path / "results.json")
    assert {v.key.vllm for v in verdicts} == {label}
    assert {v.status for v in verdicts} == {"pass"}
    assert (tmp_path / f"worker-vllm-{label.replace('@', '-')}-transformers-5.17.0.log").exists()
    bad = subprocess.run([*CONFORMANCE, "run", "--python", str(tmp_path / "nothing"),
                          "--output", str(tmp_path / "bad")], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0, bad.stderr
    assert "is not an interpreter" in bad.stderr


def test_an_install_without_its_checkout_says_to_install_it_editable(tmp_path):
    from conformance.cli.common import not_a_checkout

    assert not_a_checkout() is None
    refusal = not_a_checkout(tmp_path / "site-packages")
    assert refusal and "pip install -e CHECKOUT" in refusal and "\n" not in refusal


def test_a_conformance_variable_nothing_reads_is_a_one_line_warning(monkeypatch, capsys):
    """A typo (CONFORMANCE_CPUISA) or a setting that no longer exists is said, not ignored."""
    from conformance.cli import main
    from conformance.core.settings import unknown_variables

    monkeypatch.setenv("CONFORMANCE_CPUISA", "avx2")
    monkeypatch.setenv("CONFORMANCE_CPU_ISA", "avx2")
    assert unknown_variables() == ["CONFORMANCE_CPUISA"]
    main(["checks"])
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "warning: CONFORMANCE_CPUISA is set but no setting of this harness reads it" in err


def test_a_setting_a_runner_takes_as_an_option_is_a_warning_there(monkeypatch, capsys,
                                                                    tmp_path):
    """A runner fixes every setting from its options, so a variable that a process no runner
    started reads is said to be ignored there, not silently dropped."""
    from conformance.cli import main
    from conformance.core.settings import ignored_by_runner

    for name in ("CONFORMANCE_DEVICE", "CONFORMANCE_DTYPE", "CONFORMANCE_SEED",
                 "CONFORMANCE_HYPOTHESIS_PROFILE", "CONFORMANCE_VLLM", "CONFORMANCE_FAULT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CONFORMANCE_DTYPE", "bfloat16")
    monkeypatch.setenv("CONFORMANCE_HYPOTHESIS_PROFILE", "ci")  # CI's, for its pytest runs
    assert ignored_by_runner() == [("CONFORMANCE_DTYPE", "--dtype")]
    main(["checks"])  # not a runner: nothing to say (pytest and workers read it)
    assert "CONFORMANCE_DTYPE" not in capsys.readouterr().err
    main(["check", str(tmp_path / "not-a-checkpoint")])
    err = capsys.readouterr().err
    assert ("warning: CONFORMANCE_DTYPE is set but `conformance check` takes --dtype instead "
            "(ignored)") in err


def test_a_removed_variable_says_what_replaced_it(monkeypatch, capsys):
    """CONFORMANCE_FAULT planted a fault before `--fault` existed: nothing reads it now, and
    every command says so in one line, with the option to use."""
    from conformance.cli import main
    from conformance.core.settings import removed_variables, unknown_variables

    monkeypatch.setenv("CONFORMANCE_FAULT", "backend-bos-doubled")
    assert [name for name, _ in removed_variables()] == ["CONFORMANCE_FAULT"]
    assert "CONFORMANCE_FAULT" not in unknown_variables()  # said once, as removed
    main(["checks"])
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        "warning: CONFORMANCE_FAULT is no longer read: use --fault")
