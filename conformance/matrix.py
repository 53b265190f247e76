"""Run cells over transformers versions: one worker process per version, isolated.

A worker that crashes, hangs or cannot import turns its unfinished cells into `crash` /
`timeout` verdicts carrying the log tail; every other version's cells still run.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from conformance.verdict import Verdict
from conformance.versions import ensure_overlay
from conformance.worker import MARK

LOG_TAIL_LINES = 15


@dataclass(frozen=True)
class Plan:
    fixtures: tuple[str, ...]
    versions: tuple[str, ...]
    checks: tuple[str, ...]
    timeout_s: float = 1800.0

    def cells(self) -> list[tuple[str, str, str]]:
        return [(f, v, c) for v in self.versions for f in self.fixtures for c in self.checks]


def _tail(lines: list[str]) -> str:
    return "".join(lines[-LOG_TAIL_LINES:]).strip()


def worker_command(plan: Plan) -> list[str]:
    return [sys.executable, "-m", "conformance.worker",
            "--fixtures", ",".join(plan.fixtures), "--checks", ",".join(plan.checks)]


def _stream(process: subprocess.Popen, lines: queue.Queue) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        lines.put(line)
    lines.put(None)


def run_version(
    plan: Plan, version: str, log_dir: Path, on_verdict: Callable[[Verdict], None]
) -> None:
    """Run every (fixture, check) of `plan` on `version` in one worker process."""
    pending = {(f, version, c) for f in plan.fixtures for c in plan.checks}
    try:
        overlay = ensure_overlay(version, log=lambda m: print(f"  {m}", flush=True))
    except Exception as error:  # the version cannot be installed: its cells say so
        for fixture, _, check in sorted(pending):
            on_verdict(Verdict(fixture, version, check, "error", f"overlay: {error}"))
        return
    log_lines: list[str] = []
    deadline = time.monotonic() + plan.timeout_s
    process = subprocess.Popen(worker_command(plan), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=overlay.environ())
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_stream, args=(process, lines), daemon=True).start()
    timed_out = False
    with open(log_dir / f"worker-transformers-{version}.log", "a") as log:
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                timed_out = True
                process.kill()
                break
            if line is None:
                break
            log.write(line)
            if MARK in line:
                verdict = Verdict.from_json(line[line.index(MARK) + len(MARK):])
                pending.discard(verdict.key)
                on_verdict(verdict)
            else:
                log_lines.append(line)
    code = process.wait()
    for fixture, _, check in sorted(pending):
        if timed_out:
            status, detail = "timeout", f"worker exceeded {plan.timeout_s:.0f} s; log tail:\n"
        else:
            status, detail = "crash", f"worker exited {code} before this cell finished; log tail:\n"
        on_verdict(Verdict(fixture, version, check, status, detail + _tail(log_lines)))


def run_plan(plan: Plan, log_dir: Path, on_verdict: Callable[[Verdict], None],
             done: Iterable[tuple[str, str, str]] = ()) -> None:
    finished = set(done)
    for version in plan.versions:
        remaining = Plan(
            fixtures=tuple(f for f in plan.fixtures
                           if any((f, version, c) not in finished for c in plan.checks)),
            versions=(version,), checks=plan.checks, timeout_s=plan.timeout_s,
        )
        if remaining.fixtures:
            run_version(remaining, version, log_dir, on_verdict)
