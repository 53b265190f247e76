"""A run folder is one run's at a time: a second run into it refuses naming the first one's
process, a killed run's lock is taken over, and a rerun does not delete earlier results
unless told to (`--resume` keeps them, `--fresh` starts over; the default folder holds the
latest run). The console script refuses to run one checkout's code inside another."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.cli import main
from conformance.cli.common import other_checkout
from conformance.cli.run import DEFAULT_OUTPUT, refuses_earlier
from conformance.core.settings import Settings
from conformance.paths import ROOT
from conformance.results import report
from conformance.results.verdict import Verdict
from conformance.run.session import LOCK, PARTIAL, Session

CELL = Verdict("llava", "5.17.0", "cache", "pass", subject="impl")
# a small run: every argument valid, so that only the folder can stop it
RUN = ["run", "--vllm", "0.31.0", "--fixtures", "llava", "--versions", "5.17.0", "--checks",
       "cache", "--subjects", "impl"]


def holder(folder: Path) -> subprocess.Popen:
    """Another process holding `folder` as a session does, until it is killed."""
    script = ("import sys, time; from pathlib import Path\n"
              "from conformance.core.settings import Settings\n"
              "from conformance.run.session import Session\n"
              "Session(Settings(), Path(sys.argv[1])).open()\n"
              "print('held', flush=True); time.sleep(120)\n")
    process = subprocess.Popen([sys.executable, "-c", script, str(folder)], cwd=ROOT,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline() == "held\n"
    return process


def test_a_second_session_refuses_a_held_folder_and_takes_over_a_dead_ones(tmp_path):
    first = holder(tmp_path)
    try:
        with pytest.raises(RuntimeError) as refused:
            Session(Settings(), tmp_path).open()
        assert str(refused.value) == (
            f"{tmp_path} is in use by another run (process {first.pid}): wait for it to "
            "end, or give another --output")
    finally:
        first.kill()
        first.wait()
    assert (tmp_path / LOCK).read_text().strip() == str(first.pid)  # killed: left behind
    second = Session(Settings(), tmp_path)
    second.open()  # the dead process's lock is taken over
    assert (tmp_path / LOCK).read_text().strip() == str(os.getpid())
    second.close()
    assert not (tmp_path / LOCK).exists()


def test_a_run_into_a_held_folder_says_so_in_one_line(tmp_path):
    first = holder(tmp_path)
    try:
        out = subprocess.run([sys.executable, "-m", "conformance", *RUN, "--output",
                              str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                             timeout=300)
    finally:
        first.kill()
        first.wait()
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.splitlines() == [
        f"error: {tmp_path} is in use by another run (process {first.pid}): wait for it to "
        "end, or give another --output"]


def test_a_rerun_into_a_folder_with_results_takes_resume_or_fresh(tmp_path, capsys):
    report.append(tmp_path / PARTIAL, CELL)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "old.log").write_text("an earlier run's")
    assert main([*RUN, "--output", str(tmp_path)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {tmp_path} holds the results of an earlier run (1 cell(s)): --resume to "
        "finish it, --fresh to start it over, or another --output"]
    assert report.read_partial(tmp_path / PARTIAL) == [CELL]  # nothing deleted
    assert not (tmp_path / LOCK).exists()  # nor held
    session = Session(Settings(), tmp_path)
    assert session.open(resume=True, refuse_earlier=True) == [CELL]
    session.close()
    # --fresh: a new session that starts the folder over, its logs and reproducers too
    session = Session(Settings(), tmp_path)
    assert session.open(refuse_earlier=refuses_earlier(str(tmp_path), fresh=True)) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK]
    session.close()
    with pytest.raises(SystemExit):  # one or the other
        main([*RUN, "--output", str(tmp_path), "--resume", "--fresh"])


def test_the_default_folder_holds_the_latest_run_which_the_next_replaces():
    """The main job's command (`bootstrap.py run`, no --output) is rerun as it is."""
    assert not refuses_earlier(None, fresh=False)
    assert not refuses_earlier(str(DEFAULT_OUTPUT), fresh=False)
    assert refuses_earlier("reports/runs/mine", fresh=False)
    assert not refuses_earlier("reports/runs/mine", fresh=True)


def test_check_replaces_its_own_files_only_and_takes_the_lock(tmp_path):
    """`check` (a folder of the user's, nothing to resume) starts over its results and logs
    and leaves the rest; the lock is the same."""
    report.append(tmp_path / PARTIAL, CELL)
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "old.log").write_text("an earlier check's")
    session = Session(Settings(), tmp_path)
    assert session.open(owns_folder=False) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK, "notes.txt"]
    first = holder(tmp_path / "held")
    try:
        with pytest.raises(RuntimeError, match=f"process {first.pid}"):
            Session(Settings(), tmp_path / "held").open(owns_folder=False)
    finally:
        first.kill()
        first.wait()
    session.close()


def fake_checkout(folder: Path) -> Path:
    (folder / "conformance").mkdir(parents=True)
    (folder / "conformance" / "__init__.py").write_text("")
    (folder / "pyproject.toml").write_text('[project]\nname = "vllm-mm-conformance"\n')
    return folder


def test_code_of_one_checkout_refuses_to_run_inside_another(tmp_path):
    other = fake_checkout(tmp_path / "other")
    (other / "reports").mkdir()
    assert other_checkout(other / "reports", code=ROOT) == (
        f"this environment runs the code of the checkout {ROOT}, not of this one ({other}): "
        "build this checkout's own (`python3 scripts/bootstrap.py env` without "
        f"CONFORMANCE_VENV or a linked .venv), or run `python -m conformance` in {other}")
    assert other_checkout(ROOT / "reports", code=ROOT) is None  # its own
    assert other_checkout(tmp_path, code=ROOT) is None  # outside any checkout
    (tmp_path / "unrelated").mkdir()
    (tmp_path / "unrelated" / "pyproject.toml").write_text('[project]\nname = "other"\n')
    assert other_checkout(tmp_path / "unrelated", code=ROOT) is None


def test_the_console_script_of_a_shared_environment_refuses_another_checkout(tmp_path):
    """As CONFORMANCE_VENV or a linked .venv would have it: this environment's console
    script, run in another checkout, says so in one line instead of running this code."""
    script = Path(sys.executable).with_name("conformance")
    if not script.exists():
        pytest.skip("no console script in this environment")
    other = fake_checkout(tmp_path / "other")
    out = subprocess.run([str(script), "known"], cwd=other, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.splitlines() == [f"error: {other_checkout(other)}"]
    assert str(ROOT) in out.stderr and str(other) in out.stderr


# A run's folder end to end (its reproducers and logs inside it, one line a cell without a TTY,
# no absolute path): tests/test_report_paths.py, one run for both.
