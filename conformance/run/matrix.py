"""Run cells in worker processes, one transformers version per worker, each cell isolated.

A worker imports torch, transformers and vLLM once and runs its cells in order. When a cell
crashes the worker or runs past its time, that cell gets a `crash` / `timeout` verdict with
the log tail, and a fresh worker continues with the cells after it. A worker that cannot even
start (an import error) gives every cell it held that verdict.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from conformance.results.verdict import CellKey, Verdict
from conformance.run.versions import ensure_overlay
from conformance.run.worker import MARK, START
from impl.version import parse_version

LOG_TAIL_LINES = 20
STARTUP_S = 300.0  # importing vLLM on a loaded 2-core machine


def worker_command() -> list[str]:
    return [sys.executable, "-m", "conformance.run.worker"]


def _tail(lines: list[str]) -> str:
    return "".join(lines[-LOG_TAIL_LINES:]).strip()


def _stream(process: subprocess.Popen, lines: queue.Queue) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        lines.put(line)
    lines.put(None)


def _failed(key: CellKey, status: str, detail: str) -> Verdict:
    return Verdict(key.fixture, key.version, key.check, status, detail, subject=key.subject)


def run_worker(cells: list[CellKey], env: dict[str, str], log, on_verdict,
               cell_timeout: float, on_start=None) -> list[CellKey]:
    """Run `cells` in one worker until it finishes or fails; return the cells left to run."""
    pending = list(cells)
    process = subprocess.Popen(worker_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=env)
    assert process.stdin is not None
    process.stdin.write(json.dumps([list(c) for c in cells]))
    process.stdin.close()
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_stream, args=(process, lines), daemon=True).start()
    recent: list[str] = []
    current: CellKey | None = None
    deadline = time.monotonic() + STARTUP_S + cell_timeout
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            process.kill()
            process.wait()
            victim = current or pending[0]
            on_verdict(_failed(victim, "timeout", f"no verdict within {cell_timeout:.0f} s; "
                                                  f"log tail:\n{_tail(recent)}"))
            pending.remove(victim)
            return pending
        if line is None:
            break
        log.write(line)
        if MARK in line:
            verdict = Verdict.from_json(line[line.index(MARK) + len(MARK):])
            if verdict.key in pending:
                pending.remove(verdict.key)
            on_verdict(verdict)
            current, recent = None, []
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
    detail = f"worker exited {code} during this cell; log tail:\n{_tail(recent)}"
    if current is None:  # it never got to a cell: nothing after would fare better
        for key in pending:
            on_verdict(_failed(key, "crash", detail))
        return []
    on_verdict(_failed(current, "crash", detail))
    pending.remove(current)
    return pending


def run_version(version: str, cells: list[CellKey], log_dir: Path,
                on_verdict: Callable[[Verdict], None], cell_timeout: float = 900.0,
                on_start: Callable[[CellKey], None] | None = None,
                extra_env: dict[str, str] | None = None) -> None:
    try:
        overlay = ensure_overlay(version, log=lambda m: print(f"  {m}", flush=True))
    except Exception as error:  # the version cannot be installed: its cells say so
        for key in cells:
            on_verdict(_failed(key, "error", f"transformers {version} overlay: {error}"))
        return
    env = {**overlay.environ(), **(extra_env or {})}
    pending = list(cells)
    with open(log_dir / f"worker-transformers-{version}.log", "a") as log:
        while pending:
            pending = run_worker(pending, env, log, on_verdict, cell_timeout, on_start)


def run_cells(cells: Iterable[CellKey], log_dir: Path, on_verdict: Callable[[Verdict], None],
              *, jobs: int = 1, cell_timeout: float = 900.0,
              on_start: Callable[[CellKey], None] | None = None) -> None:
    """Every cell, each version in its own worker; `jobs` versions at a time."""
    by_version: dict[str, list[CellKey]] = defaultdict(list)
    for key in cells:
        by_version[key.version].append(key)
    lock = threading.Lock()

    def report(verdict: Verdict) -> None:
        with lock:
            on_verdict(verdict)

    def started(key: CellKey) -> None:
        if on_start:
            with lock:
                on_start(key)

    versions = sorted(by_version, key=parse_version)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for future in [pool.submit(run_version, v, by_version[v], log_dir, report, cell_timeout,
                                   started) for v in versions]:
            future.result()
