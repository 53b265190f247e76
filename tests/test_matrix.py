"""A crashing or failing cell becomes a verdict; the other cells keep theirs."""

import sys

from conformance import matrix
from conformance.matrix import Plan, run_version
from conformance.verdict import Verdict
from conformance.worker import MARK


def test_a_worker_crash_marks_only_the_unfinished_cells(tmp_path, monkeypatch):
    finished = Verdict("llava", "5.17.0", "processing", "pass").to_json()
    script = f"print({MARK + finished!r}); print('boom: segfault-ish'); raise SystemExit(139)"
    monkeypatch.setattr(matrix, "worker_command",
                        lambda plan: [sys.executable, "-c", script])
    got: list[Verdict] = []
    plan = Plan(fixtures=("llava", "gemma3"), versions=("5.17.0",), checks=("processing",))
    run_version(plan, "5.17.0", tmp_path, got.append)
    by_fixture = {v.fixture: v for v in got}
    assert by_fixture["llava"].status == "pass"
    assert by_fixture["gemma3"].status == "crash"
    assert "exited 139" in by_fixture["gemma3"].detail
    assert "boom: segfault-ish" in by_fixture["gemma3"].detail


def test_a_hung_worker_times_out(tmp_path, monkeypatch):
    monkeypatch.setattr(matrix, "worker_command", lambda plan: [
        sys.executable, "-c", "import time\nwhile True:\n    print('tick', flush=True)\n"
        "    time.sleep(0.2)"])
    got: list[Verdict] = []
    plan = Plan(fixtures=("llava",), versions=("5.17.0",), checks=("processing",), timeout_s=1)
    run_version(plan, "5.17.0", tmp_path, got.append)
    assert [v.status for v in got] == ["timeout"]


def test_an_unknown_fixture_is_an_error_cell_not_a_crash():
    from conformance.smoke import run_cells

    (verdict,) = run_cells(["nope"], ["processing"])
    assert verdict.status == "error" and "unknown fixture 'nope'" in verdict.detail


def test_a_verdict_after_an_unterminated_progress_line_is_still_read(tmp_path, monkeypatch):
    finished = Verdict("llava", "5.17.0", "processing", "pass").to_json()
    script = f"import sys; sys.stdout.write('progress 50%\\r' + {MARK + finished!r} + '\\n')"
    monkeypatch.setattr(matrix, "worker_command", lambda plan: [sys.executable, "-c", script])
    got: list[Verdict] = []
    plan = Plan(fixtures=("llava",), versions=("5.17.0",), checks=("processing",))
    run_version(plan, "5.17.0", tmp_path, got.append)
    assert [v.status for v in got] == ["pass"]
