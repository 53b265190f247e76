"""The runner's side of the worker protocol: start a worker process on one (vLLM, transformers
version), hand it the run's settings and its cells, and read back each cell's verdict.

A worker runs in its vLLM release's environment (`vllms.VllmUnderTest.python`), with the
transformers overlay and, for a vLLM folder, that folder first on PYTHONPATH. Its messages are
lines of JSON on stdin: the run's settings first, then lists of cells (`run/worker.py` is the
other side). A worker imports torch, transformers and vLLM once and runs its cells in order.
When a cell crashes the worker or runs past its time, that cell gets a `crash` / `timeout`
verdict with the worker's last words, and a fresh worker continues with the cells after it. A
worker that cannot even start (an import error) gives every cell it held that verdict. What a
worker prints goes to its log; what it printed for a bad cell (since the verdict before) also
to that cell's own log (`logs.py`).
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from conformance.core.settings import Settings
from conformance.core.vllms import DEFAULT_VLLM, Release, VllmUnderTest, of_label
from conformance.results.verdict import CellKey, Verdict
from conformance.run.logs import exit_text, last_words, write_log
from conformance.run.plan import Cell
from conformance.run.versions import ensure_overlay
from conformance.subjects.faults import Fault

# The worker's marks on its stdout, each opening a line of its own: START and a cell's key
# before the cell, MARK and its verdict after it
MARK = "@@verdict@@ "
START = "@@start@@ "


@dataclass(frozen=True)
class Launch:
    """How the workers of one (vLLM, transformers version) are started."""

    version: str
    log_dir: Path  # the run folder: the workers' logs, the cells' logs/ and repro/
    settings: Settings = field(default_factory=Settings)
    vllm: VllmUnderTest | None = None  # None: the default release
    cell_timeout: float = 900.0
    log_name: str | None = None  # None: `log_file`'s
    env: Mapping[str, str] = field(default_factory=dict)  # the CPU share it is pinned to
    fault: Fault | None = None  # the run's planted fault, sent with each cell it reaches


STARTUP_S = 300.0  # importing vLLM on a loaded 2-core machine


def worker_command() -> list[str]:
    return [sys.executable, "-m", "conformance.run.worker"]


def _stream(process: subprocess.Popen, lines: queue.Queue) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        lines.put(line)
    lines.put(None)


def _failed(key: CellKey, status: str, detail: str) -> Verdict:
    return Verdict.of(key, status, detail)


Feed = Callable[[], "list[CellKey] | None"]


def _send(process: subprocess.Popen, message: object) -> None:
    """One line of the worker's stdin: {"settings": ...} (first), {"build": fixtures}, or a
    list of cells to run (`work`)."""
    assert process.stdin is not None
    try:
        process.stdin.write(json.dumps(message) + "\n")
        process.stdin.flush()
    except OSError:  # it has died: its exit is read below
        pass


def _close(process: subprocess.Popen) -> None:
    """End the worker's stdin. A worker that died before reading it leaves the unsent lines
    in the pipe's buffer, which closing flushes into the broken pipe: its exit is read below,
    as `_send`'s is."""
    assert process.stdin is not None
    try:
        process.stdin.close()
    except OSError:
        pass


def work(cells: list[CellKey], launch: Launch) -> list[dict]:
    """What the worker is sent for `cells`: each one's work description, the run's fault with
    it where the fault reaches it (`Cell.of`)."""
    return [Cell.of(key, launch.fault).to_json() for key in cells]


def run_worker(cells: list[CellKey], launch: Launch, env: Mapping[str, str], log, on_verdict,
               on_start=None, feed: Feed | None = None,
               build: list[str] | None = None) -> list[CellKey]:
    """Run `cells` in one worker until it finishes or fails; return the cells left to run.

    With `feed`, the worker is kept: each time it has a verdict for every cell it was given,
    `feed()` gives it the next cells (one fixture's), until it returns None. `build`: the
    fixtures it may be given, built before any cell (see `worker.build_all`)."""
    pending = list(cells)
    cell_timeout = launch.cell_timeout
    vllm = launch.vllm or of_label(DEFAULT_VLLM)
    command = worker_command()
    if vllm.python != Path(sys.executable):  # another environment, same module
        command = [str(vllm.python), *command[1:]]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=dict(env))
    assert process.stdin is not None
    _send(process, {"settings": launch.settings.but(vllm=vllm.label).to_json(),
                    "folder": str(launch.log_dir)})
    if feed is not None and build:
        _send(process, {"build": build})
    _send(process, work(cells, launch))
    if feed is None:
        _close(process)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_stream, args=(process, lines), daemon=True).start()
    recent: list[str] = []  # the worker's output since its last verdict: the next cell's
    current: CellKey | None = None

    def conclude(verdict: Verdict) -> None:
        on_verdict(write_log(launch.log_dir, verdict, recent))

    deadline = time.monotonic() + STARTUP_S + cell_timeout
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            process.kill()
            process.wait()
            victim = current or pending[0]
            conclude(_failed(victim, "timeout", f"no verdict within {cell_timeout:.0f} s; "
                                                f"last output: {last_words(recent)}"))
            pending.remove(victim)
            return pending
        if line is None:
            break
        log.write(line)
        if MARK in line:
            verdict = Verdict.from_json(line[line.index(MARK) + len(MARK):])
            if verdict.key in pending:
                pending.remove(verdict.key)
            conclude(verdict)
            current, recent = None, []
            if feed is not None and not pending:
                following = feed()
                if following:
                    pending = list(following)
                    _send(process, work(following, launch))
                    deadline = time.monotonic() + cell_timeout
                else:
                    feed = None
                    _close(process)
        elif START in line:
            current = CellKey(*json.loads(line[line.index(START) + len(START):]))
            deadline = time.monotonic() + cell_timeout
            if on_start:
                on_start(current)
        else:
            recent.append(line)
    code = process.wait()
    if not pending:
        return []
    detail = (f"worker exited {exit_text(code)} during this cell; last output: "
              f"{last_words(recent)}")
    if current is None:  # it never got to a cell: nothing after would fare better
        for key in pending:
            conclude(_failed(key, "crash", detail))
        return []
    conclude(_failed(current, "crash", detail))
    pending.remove(current)
    return pending


def log_file(vllm: str, version: str, part: int | None = None) -> str:
    """A worker's log: per transformers version, its vLLM named unless it is the default."""
    prefix = "" if vllm == DEFAULT_VLLM else f"vllm-{vllm.replace('@', '-')}-"
    return f"worker-{prefix}transformers-{version}" + (f"-part{part}" if part else "") + ".log"


def run_version(launch: Launch, cells: list[CellKey], on_verdict: Callable[[Verdict], None],
                on_start: Callable[[CellKey], None] | None = None, feed: Feed | None = None,
                build: list[str] | None = None) -> None:
    """`cells` in workers on `launch.version` (a fresh one after a crash or a timeout), then,
    with `feed`, whatever it gives them. `build`: the fixtures they may be given."""
    version, vllm = launch.version, launch.vllm or of_label(DEFAULT_VLLM)
    try:
        overlay = ensure_overlay(version, log=lambda m: print(f"  {m}", flush=True),
                                 vllm=vllm.key)
        if not vllm.python.exists():
            raise RuntimeError(f"no environment at {vllm.home.venv}" + (
                f": run `python3 scripts/bootstrap.py env --vllm {vllm.key}`"
                if isinstance(vllm.home, Release) else ""))
    except Exception as error:  # the version cannot be installed: its cells say so
        while cells:
            for key in cells:
                on_verdict(_failed(key, "error", f"transformers {version} overlay for "
                                                 f"{vllm.describe()}: {error}"))
            cells = (feed and feed()) or []
        return
    env = {**vllm.environ(overlay.environ()), **launch.env}
    pending = list(cells)
    with open(launch.log_dir / (launch.log_name or log_file(vllm.label, version)), "a") as log:
        while pending:
            pending = run_worker(pending, launch, env, log, on_verdict, on_start, feed, build)
            if not pending and feed is not None:  # the worker ended with cells still to give
                pending = feed() or []
