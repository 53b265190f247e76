"""A crashing, hanging or failing cell becomes that cell's verdict; the other cells keep theirs."""

import json
import sys
from pathlib import Path

from conformance.core.settings import Settings
from conformance.results.verdict import CellKey, Verdict
from conformance.run import matrix, workers
from conformance.run.plan import Cell, expand_cells, shard
from conformance.run.worker import MARK, START
from conformance.run.workers import Launch, run_version
from conformance.subjects.faults import Fault

A = CellKey("llava", "5.17.0", "impl", "cache")
B = CellKey("gemma3", "5.17.0", "impl", "cache")
C = CellKey("idefics3", "5.17.0", "impl", "cache")


def fake_worker(monkeypatch, script: str) -> None:
    monkeypatch.setattr(workers, "worker_command", lambda: [sys.executable, "-c", script])


def verdict_line(key: CellKey, status: str = "pass") -> str:
    v = Verdict(key.fixture, key.version, key.check, status, subject=key.subject)
    return repr(MARK + v.to_json())


def start_line(key: CellKey) -> str:
    return repr(START + json.dumps(list(key)))


def test_a_crash_costs_only_the_cell_it_happened_in(tmp_path, monkeypatch):
    # The worker crashes on B whatever it is given; restarted, it goes on with C.
    script = (
        "import json, sys\n"
        "settings = json.loads(sys.stdin.readline())['settings']\n"
        "cells = [tuple(c['key']) for c in json.load(sys.stdin)]\n"
        "for cell in cells:\n"
        f"    print({start_line(A)[:-1]}'.replace('llava', cell[0]))\n"
        "    if cell[0] == 'gemma3':\n"
        "        print('boom: segfault-ish'); raise SystemExit(139)\n"
        f"    print({verdict_line(A)}.replace('llava', cell[0]))\n"
    )
    fake_worker(monkeypatch, script)
    got: list[Verdict] = []
    run_version(Launch("5.17.0", tmp_path), [A, B, C], got.append)
    by_fixture = {v.fixture: v for v in got}
    assert by_fixture["llava"].status == "pass"
    assert by_fixture["gemma3"].status == "crash"
    assert "exited 139" in by_fixture["gemma3"].detail
    assert "boom: segfault-ish" in by_fixture["gemma3"].detail
    assert by_fixture["idefics3"].status == "pass"


def test_a_hung_cell_times_out_and_the_next_still_runs(tmp_path, monkeypatch):
    script = (
        "import json, sys, time\n"
        "settings = json.loads(sys.stdin.readline())['settings']\n"
        "cells = [tuple(c['key']) for c in json.load(sys.stdin)]\n"
        "for cell in cells:\n"
        f"    print({start_line(A)[:-1]}'.replace('llava', cell[0]), flush=True)\n"
        "    if cell[0] == 'llava':\n"
        "        time.sleep(60)\n"
        f"    print({verdict_line(A)}.replace('llava', cell[0]), flush=True)\n"
    )
    fake_worker(monkeypatch, script)
    got: list[Verdict] = []
    run_version(Launch("5.17.0", tmp_path, cell_timeout=2), [A, B], got.append)
    assert [(v.fixture, v.status) for v in got] == [("llava", "timeout"), ("gemma3", "pass")]


def test_a_worker_that_cannot_start_fails_every_cell_once(tmp_path, monkeypatch):
    fake_worker(monkeypatch, "raise ImportError('no module named vllm')")
    got: list[Verdict] = []
    run_version(Launch("5.17.0", tmp_path), [A, B], got.append)
    assert [v.status for v in got] == ["crash", "crash"]
    assert "no module named vllm" in got[0].detail


def test_a_verdict_after_an_unterminated_progress_line_is_still_read(tmp_path, monkeypatch):
    fake_worker(monkeypatch, f"import sys; sys.stdout.write('progress 50%\\r' + {verdict_line(A)} "
                             "+ '\\n')")
    got: list[Verdict] = []
    run_version(Launch("5.17.0", tmp_path), [A], got.append)
    assert [v.status for v in got] == ["pass"]


def test_a_worker_dead_before_reading_its_stdin_is_no_crash_of_the_run():
    """Closing the stdin of a worker that exited without reading it flushes what is left in
    the pipe's buffer into a broken pipe: the run reads the worker's exit instead (under load
    a fake worker's quick exit raced the parent's writes)."""
    import subprocess

    process = subprocess.Popen([sys.executable, "-c", "pass"], stdin=subprocess.PIPE, text=True)
    process.wait()
    process.stdin.write("x" * 10)  # buffered, not yet written
    workers._close(process)  # no BrokenPipeError
    assert process.stdin.closed or process.returncode == 0


def test_an_unknown_fixture_is_an_error_cell_not_a_crash():
    import transformers

    from conformance.run.cell import run_cell

    verdict = run_cell(Cell(CellKey("nope", transformers.__version__, "impl", "cache")))
    assert verdict.status == "error" and "unknown fixture 'nope'" in verdict.detail


def test_the_model_checks_are_planned_on_every_version():
    versions = ("5.12.1", "5.17.0", "5.20.2", "5.24.0")
    cells = expand_cells(["llava"], versions, ["impl", "vllm-backend"], ["model", "cache"])
    assert CellKey("llava", "5.24.0", "vllm-backend", "model") in cells  # beyond the window
    assert CellKey("llava", "5.24.0", "impl", "cache") in cells


def test_shards_partition_the_cells_by_version_and_fixture():
    cells = expand_cells(["llava", "gemma3", "idefics3"], ("5.12.1", "5.17.0"),
                         ["impl", "vllm-backend"], ["processing", "cache"])
    parts = [shard(cells, i, 3) for i in (1, 2, 3)]
    assert sorted(c for part in parts for c in part) == sorted(cells)
    assert all(part for part in parts)
    for part in parts:
        groups = {(c.version, c.fixture) for c in part}
        assert all((c.version, c.fixture) in groups for c in part)


def test_a_version_is_shared_by_fixtures_when_jobs_outnumber_versions():
    cells = expand_cells(["llava", "gemma3", "idefics3"], ["5.17.0"], ["impl"],
                         ["cache", "slicing"])
    plans = matrix.worker_plans(cells, jobs=2, costs={"llava": 10.0, "gemma3": 6.0,
                                                      "idefics3": 5.0})
    # each worker starts on one of the costliest fixtures, then both take from one queue
    assert [sorted({c.fixture for c in p.cells}) for p in plans] == [["llava"], ["gemma3"]]
    assert plans[0].feed is plans[1].feed and plans[0].feed.fixtures[-1] == "idefics3"
    assert {c.fixture for c in plans[0].feed()} == {"idefics3"} and plans[0].feed() is None
    # as many versions as jobs: one worker per version, starting on its first fixture and
    # taking the others from its own queue (which a job left free may help with)
    two = expand_cells(["llava", "gemma3"], ["5.12.1", "5.17.0"], ["impl"], ["cache"])
    plans = matrix.worker_plans(two, jobs=2, costs={})
    assert sorted(len(p.cells) for p in plans) == [1, 1]
    assert len({id(p.feed) for p in plans}) == 2 and all(p.feed.remaining() for p in plans)


def test_a_job_left_free_helps_the_version_with_most_work_left():
    cells = expand_cells(["llava", "gemma3", "idefics3"], ["5.15.1", "5.17.0"], ["impl"],
                         ["cache"])
    costs = {("llava", "5.15.1"): 50.0, ("gemma3", "5.15.1"): 40.0,
             ("idefics3", "5.15.1"): 30.0, ("llava", "5.17.0"): 20.0,
             ("gemma3", "5.17.0"): 10.0, ("idefics3", "5.17.0"): 5.0}
    plans = matrix.worker_plans(cells, jobs=2, costs=costs)
    slow = next(p for p in plans if p.cells[0].version == "5.15.1")
    assert slow.feed.remaining() == 70.0  # gemma3 and idefics3 not taken yet
    helper = matrix.helper_plan(plans, minimum=30.0)
    assert helper.feed is slow.feed and {c.fixture for c in helper.cells} == {"gemma3"}
    assert helper.cells[0].version == "5.15.1"
    # what is left (idefics3, 30 s, and 5.17.0's 15 s) is not worth a worker's start at 40 s
    assert matrix.helper_plan(plans, minimum=40.0) is None
    assert {c.fixture for c in slow.feed()} == {"idefics3"} and slow.feed() is None


FED_WORKER = (
    "import json, sys\n"
    "from conformance.run.worker import messages\n"
    "for message in messages(sys.stdin):\n"
    "    if isinstance(message, dict) and 'settings' in message:\n"
    "        print('settings', message['settings'], flush=True); continue\n"
    "    if isinstance(message, dict):\n"
    "        print('built', sorted(message['build']), flush=True); continue\n"
    "    for cell in (c['key'] for c in message):\n"
    f"        print({start_line(A)[:-1]}'.replace('llava', cell[0]), flush=True)\n"
    "        if cell[0] == 'gemma3':\n"
    "            raise SystemExit(139)\n"
    f"        print({verdict_line(A)}.replace('llava', cell[0]), flush=True)\n"
)


def test_workers_sharing_a_version_take_its_fixtures_one_at_a_time(tmp_path, monkeypatch):
    """A worker fed fixture by fixture: built first, each next fixture given when the last
    verdict of the one before is in; a crash costs its cell, a fresh worker takes the rest."""
    fake_worker(monkeypatch, FED_WORKER)
    D = CellKey("qwen2_vl", "5.17.0", "impl", "cache")
    queue = matrix.FixtureQueue([A, B, C, D], {"llava": 4, "gemma3": 3, "idefics3": 2,
                                               "qwen2_vl": 1}.get)
    got: list[Verdict] = []
    launch = Launch("5.17.0", tmp_path, Settings(profile="ci", seed=7), log_name="w.log")
    run_version(launch, queue() or [], got.append, feed=queue, build=queue.fixtures)
    assert [(v.fixture, v.status) for v in got] == [
        ("llava", "pass"), ("gemma3", "crash"), ("idefics3", "pass"), ("qwen2_vl", "pass")]
    log = (tmp_path / "w.log").read_text()
    assert log.count("built ['gemma3', 'idefics3', 'llava', 'qwen2_vl']") == 2  # and restarted
    # each worker is handed the run's settings first, with the vLLM it runs
    assert log.count("settings {'device': 'cpu', 'dtype': 'float32', 'profile': 'ci', "
                     "'seed': 7, 'vllm': '0.31.0'}") == 2


def test_the_worker_reads_the_runners_cells_whole_or_line_by_line():
    import io

    from conformance.run.worker import messages

    assert list(messages(io.StringIO(json.dumps([list(A), list(B)])))) == [[list(A), list(B)]]
    lines = io.StringIO('{"build": ["llava"]}\n' + json.dumps([list(A)]) + "\n")
    assert list(messages(lines)) == [{"build": ["llava"]}, [list(A)]]


def test_each_job_gets_its_own_cpus(monkeypatch):
    monkeypatch.setattr(matrix.os, "sched_getaffinity", lambda _: {0, 1, 2, 3})
    assert matrix.cpu_shares(2) == [(0, 1), (2, 3)]
    assert matrix.cpu_shares(1) == [(0, 1, 2, 3)]
    assert matrix.share_env((2, 3))["OMP_NUM_THREADS"] == "2"


def test_a_worker_warm_up_that_cannot_import_or_compile_goes_on(monkeypatch, capsys):
    """The warm-up only moves time out of the first cell: what it cannot do, a cell reports."""
    from conformance.run import worker

    def no_sampler():
        raise ImportError("no vllm.v1.sample")

    monkeypatch.setattr(worker, "WARM_UP", ("no_such_module_anywhere",))
    monkeypatch.setattr(worker, "compile_sampler", no_sampler)
    worker.warm_up(engine=True)
    out = capsys.readouterr().out
    assert "cannot import no_such_module_anywhere" in out
    assert "sampler not compiled: no vllm.v1.sample" in out


def test_only_a_worker_with_a_model_check_compiles_the_sampler():
    from conformance.run import worker

    def cells(*checks: str) -> list[Cell]:
        return [Cell(CellKey("llava", "5.17.0", "vllm-backend", check)) for check in checks]

    assert not worker.loads_an_engine(cells("prompt-ids", "cache", "no-such-check"))
    assert worker.loads_an_engine(cells("prompt-ids", "generate"))


# --- each bad cell's log, its one-line detail, and the run folder the workers are told ----------


NOISY_WORKER = (
    "import json, sys\n"
    "first = json.loads(sys.stdin.readline())\n"
    "print('folder', first['folder'], flush=True)\n"
    "cells = [tuple(c['key']) for c in json.load(sys.stdin)]\n"
    "for cell in cells:\n"
    f"    print({start_line(A)[:-1]}'.replace('llava', cell[0]), flush=True)\n"
    "    print('FutureWarning: noise of', cell[0], flush=True)\n"
    "    print('Loading weights: 50%\\rLoading weights: 100%', flush=True)\n"
    "    if cell[0] == 'gemma3':\n"
    "        print('Traceback (most recent call last):', flush=True)\n"
    "        print('ValueError: the whole story of', cell[0], flush=True)\n"
    f"        print({verdict_line(A, 'error')}.replace('llava', cell[0]), flush=True)\n"
    "    elif cell[0] == 'idefics3':\n"
    "        print('boom: segfault-ish', flush=True); raise SystemExit(-11)\n"
    "    else:\n"
    f"        print({verdict_line(A)}.replace('llava', cell[0]), flush=True)\n"
)


def test_a_bad_cells_output_goes_to_its_log_which_its_verdict_names(tmp_path, monkeypatch):
    """What a worker prints for a cell (warnings, loading bars, the error's whole text) is
    kept in that cell's log when it is bad, named relative to the run folder; a good cell
    keeps none. The worker is told the run folder (its reproducers go under it)."""
    from conformance.run.logs import exit_text

    fake_worker(monkeypatch, NOISY_WORKER)
    got: list[Verdict] = []
    run_version(Launch("5.17.0", tmp_path, log_name="w.log"), [A, B, C], got.append)
    by_fixture = {v.fixture: v for v in got}
    assert by_fixture["llava"].status == "pass" and by_fixture["llava"].log is None
    error, crash = by_fixture["gemma3"], by_fixture["idefics3"]
    assert error.log == "logs/gemma3-impl-cache-transformers-5.17.0.log"
    text = (tmp_path / error.log).read_text()
    assert text.startswith("cell: gemma3 / impl / cache / transformers 5.17.0\nverdict: error")
    assert "FutureWarning: noise of gemma3" in text and "the whole story of gemma3" in text
    assert "noise of llava" not in text  # the cell before it: not this cell's
    # a crash: one line with the worker's last words; everything it printed in the log
    assert crash.status == "crash" and "\n" not in crash.detail
    assert crash.detail == ("worker exited 245 during this cell; last output: "
                            "boom: segfault-ish")
    assert "Loading weights: 100%" in (tmp_path / crash.log).read_text()
    assert exit_text(-11) == "-11 (SIGSEGV)"  # a worker killed by a signal
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == [
        "gemma3-impl-cache-transformers-5.17.0.log", "idefics3-impl-cache-transformers-5.17.0.log"]
    assert f"folder {tmp_path}" in (tmp_path / "w.log").read_text()


def raising_check(error: Exception):
    class Raising:
        id, level, exhaustive = "model", "checkpoint", True
        loads_model = False  # the raising stands in for the model: no engine to ask about

        def run(self, *args, **kwargs):
            raise error

    return Raising()


def glm4v_like_error() -> Exception:
    """As vLLM raises it: the HF processor's error, wrapped in a message that holds the whole
    prompt (`Failed to apply <Processor> on data=...`)."""
    try:
        try:
            raise ValueError("Found 300 <|video|> tokens in the text but no videos were passed")
        except ValueError as cause:
            raise ValueError("Failed to apply Glm4vProcessor on data={'text': '"
                             + "<|video|>" * 1500 + "'} with kwargs={}") from cause
    except ValueError as error:
        return error


def test_an_error_detail_starts_with_its_innermost_cause_and_its_log_has_the_rest(tmp_path):
    """The cause first, about 300 characters; the whole text (the dumped prompt, both
    tracebacks) in the cell's log, and nothing of it on the terminal."""
    import transformers

    from conformance.run.cell import run_checkpoint
    from conformance.run.logs import CAUSE_CHARS, in_process

    key = CellKey("llava", transformers.__version__, "vllm-backend", "model")
    error = glm4v_like_error()
    verdict = in_process(tmp_path, lambda: run_checkpoint(key, None, raising_check(error),
                                                          lambda: "/nowhere"))
    assert verdict.status == "error"
    assert verdict.detail.startswith("ValueError: Found 300 <|video|> tokens in the text but "
                                     "no videos were passed (raised as ValueError: Failed to "
                                     "apply Glm4vProcessor on data=")
    assert len(verdict.detail) <= CAUSE_CHARS and verdict.evidence.texts() == [verdict.detail]
    log = (tmp_path / verdict.log).read_text()
    assert "<|video|>" * 1500 in log and log.count("Traceback (most recent call last)") == 2
    # a cell that is not bad keeps no log
    passing = in_process(tmp_path, lambda: Verdict.of(key, "pass"))
    assert passing.log is None and [p.name for p in (tmp_path / "logs").iterdir()] == [
        f"llava-vllm-backend-model-transformers-{transformers.__version__}.log"]


def test_an_error_a_finding_explains_keeps_its_judged_evidence():
    """Only `error` verdicts are reworded: a known failure's evidence is what the findings
    and the gate's signatures match (reports/baseline.json's known cells)."""
    from conformance.run.logs import as_error

    error = glm4v_like_error()
    known = Verdict.of(A, "xfail", "reason [observed: ValueError: Failed to apply ...]")
    assert as_error(known, error) is known


def test_the_worker_puts_a_runs_reproducers_in_its_folder(tmp_path, monkeypatch, capsys):
    """A worker's suites write their reproducers under the folder its runner names (the
    run's), never under the repository's reports/."""
    import io

    from conformance.run import cell, worker

    given = []
    monkeypatch.setattr(cell, "run_cell", lambda given_cell, **kw: given.append(kw) or
                        Verdict.of(given_cell.key, "pass"))
    monkeypatch.setattr(worker, "build_all", lambda fixtures: None)
    monkeypatch.setattr(worker, "warm_up", lambda engine: None)
    messages = [{"settings": Settings().to_json(), "folder": str(tmp_path)}, [Cell(A).to_json()]]
    monkeypatch.setattr(worker.sys, "stdin", io.StringIO("\n".join(map(json.dumps, messages))))
    assert worker.main([]) == 0
    assert given == [{"repro_dir": tmp_path / "repro"}]
    assert MARK in capsys.readouterr().out


def test_without_a_tty_each_cell_is_one_unwrapped_line_with_its_number_and_time_left(capsys):
    """A CI log: one line per cell, whatever its length (rich wraps at 80 columns without a
    terminal), with N/total and the time left at the pace so far."""
    from conformance.cli.run import Progress, duration

    long = CellKey("qwen2_5_omni_thinker", "5.17.0", "vllm-backend", "dummy-data")
    with Progress(3, 0, terminal=False) as progress:
        progress.started(long)
        progress.finished(Verdict.of(long, "pass", seconds=12.5))
        progress.finished(Verdict.of(A, "n/a"))
        progress.finished(Verdict.of(B, "fail", "ids differ", seconds=1.0))
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3, lines
    assert lines[0].startswith("[1/3]    pass  qwen2_5_omni_thinker / vllm-backend / dummy-data "
                               "/ transformers 5.17.0 (12.5 s); about ")
    assert lines[0].endswith(" left") and len(lines[0]) > 80
    assert lines[1].startswith("[2/3]     n/a  llava / impl / cache")
    assert lines[2] == "[3/3]    fail  gemma3 / impl / cache / transformers 5.17.0 (1.0 s)"
    assert [duration(s) for s in (42, 125, 3700)] == ["42 s", "2 min", "1 h 02 min"]


def test_on_a_tty_only_the_bad_cells_are_printed_above_the_bar(capsys):
    from conformance.cli.run import Progress

    with Progress(2, 0, terminal=True) as progress:
        progress.bar.stop()  # rich's live bar is no part of what is checked
        progress.finished(Verdict.of(A, "pass", seconds=1.0))
        progress.finished(Verdict.of(B, "crash", "worker exited -11", seconds=2.0))
    out = capsys.readouterr().out
    assert "crash  gemma3 / impl / cache / transformers 5.17.0 (2.0 s)" in out
    assert "llava / impl / cache" not in out and "[1/2]" not in out


def test_a_cells_reproducer_is_written_where_its_run_says(tmp_path):
    """A failing suite cell of a run writes its reproducer under the run folder's repro/
    (the worker passes it: `test_the_worker_puts_a_runs_reproducers_in_its_folder`)."""
    import transformers

    from conformance.run.cell import run_cell

    key = CellKey("llava", transformers.__version__, "impl", "placeholders")
    # impl's placeholders shifted: the cell fails
    verdict = run_cell(Cell.of(key, Fault.parse("offset-shift")), repro_dir=tmp_path / "repro")
    assert verdict.status == "fail", verdict
    assert Path(verdict.data["reproducer"]).parent == tmp_path / "repro"
    assert Path(verdict.data["reproducer"]).exists()


def test_the_worker_settles_its_heap_once_per_fixture_before_its_cells(monkeypatch, capsys):
    """What a fixture's cells leave cached lives as long as the worker: the heap is collected and
    frozen when the next fixture starts (core/heap.py), not before every cell."""
    import io

    from conformance.core import heap
    from conformance.run import cell, worker

    events = []
    monkeypatch.setattr(cell, "run_cell", lambda given, **kw: events.append(given.key.fixture)
                        or Verdict.of(given.key, "pass"))
    monkeypatch.setattr(heap, "settle", lambda: events.append("settle"))
    monkeypatch.setattr(worker, "build_all", lambda fixtures: None)
    monkeypatch.setattr(worker, "warm_up", lambda engine: None)
    other = CellKey("llava", "5.17.0", "impl", "errors")
    messages = [{"settings": Settings().to_json()},
                [Cell(A).to_json(), Cell(other).to_json()], [Cell(B).to_json(), Cell(A).to_json()]]
    monkeypatch.setattr(worker.sys, "stdin", io.StringIO("\n".join(map(json.dumps, messages))))
    assert worker.main([]) == 0
    assert events == ["settle", "llava", "llava", "settle", "gemma3", "settle", "llava"]


def test_a_settled_heap_is_frozen_after_a_collection_and_left_alone_when_disabled(monkeypatch):
    import gc

    from conformance.core import heap

    calls = []
    monkeypatch.setattr(gc, "collect", lambda *a: calls.append("collect") or 0)
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    heap.settle()
    heap.freeze()
    with heap.settled_after():
        assert not gc.isenabled()
    assert gc.isenabled()
    assert calls == ["collect", "freeze", "freeze", "collect", "freeze"]
    calls.clear()
    monkeypatch.setattr(heap, "ENABLED", False)
    heap.settle()
    heap.freeze()
    with heap.settled_after():
        assert gc.isenabled()
    assert calls == []
