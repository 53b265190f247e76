"""A bad cell's log, and the one-line error detail beside it.

A verdict says in one line what went wrong: an error's detail is its innermost cause (the
exception that started it, type and message), then what it surfaced as, about 300 characters
in all. The cell's log keeps the rest: the whole error text (every chained exception with its
traceback) and whatever the cell's process printed while the cell ran (vLLM's and
transformers' messages, warnings, loading bars), so that neither the verdict lines nor the
reports carry it. The runner splits a worker's output by cell (`workers.py`); a command that
runs its cells in this process (`check`) captures each cell's output (`in_process`). A cell that
is not bad keeps no log of its own: its worker's log has its output.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from conformance.core.vllms import DEFAULT_VLLM
from conformance.results.judge import stable_text
from conformance.results.verdict import BAD, CellKey, Verdict

LOGS = "logs"  # the cells' logs, under the run folder
CAUSE_CHARS = 300  # an error detail: the innermost cause, then what it surfaced as


def error_line(error: BaseException, limit: int | None = None) -> str:
    """An exception on one line, its type then its message (cut at `limit` characters)."""
    message = " ".join(str(error).split())
    if limit is not None and len(message) > limit:
        message = message[:limit] + "…"
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def innermost(error: BaseException) -> BaseException:
    """The exception that started `error`'s chain: its explicit causes (`raise ... from`), else
    the exception being handled when it was raised."""
    seen = {id(error)}
    while True:
        cause = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
        if cause is None or id(cause) in seen:
            return error
        seen.add(id(cause))
        error = cause


def cause_first(error: BaseException, limit: int = CAUSE_CHARS) -> str:
    """`error` as a verdict's detail: its innermost cause first, then the exception it surfaced
    as (vLLM wraps a failing HF processor call in "Failed to apply <Processor> on data=<the
    whole prompt>": the cause is what says what failed), cut at `limit` characters."""
    inner = innermost(error)
    text = error_line(inner)
    if inner is not error:
        text += f" (raised as {error_line(error)})"
    text = stable_text(text)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def as_error(verdict: Verdict, error: BaseException, prefix: str = "") -> Verdict:
    """A verdict judged from `error`: when it is `error` (no finding explains it), its detail is
    the cause first and the whole error text goes to the cell's output, which its log keeps.
    Any other verdict (a known finding) is left as the judge wrote it."""
    if verdict.status != "error":
        return verdict
    sys.stdout.flush()
    traceback.print_exception(error, file=sys.stderr)
    sys.stderr.flush()
    detail = prefix + cause_first(error)
    if verdict.evidence is None:
        return replace(verdict, detail=detail)
    # the judge's record of it, as the line now says it
    return replace(verdict, detail="", evidence=verdict.evidence.reworded(detail))


# what a crashed worker's last lines say when they say why (else its last line is taken)
_CRASH_WORDS = re.compile(r"Error|Exception|Fatal|fault|Killed|Abort|core dumped|Traceback")


def last_words(lines: Iterable[str], limit: int = CAUSE_CHARS) -> str:
    """What a worker said last before it died or hung: its last line naming an error, else
    its last line (a progress bar's last state, where it redrew one line)."""
    said = [part.strip() for line in lines for part in line.split("\r") if part.strip()]
    if not said:
        return "no output"
    named = [line for line in said if _CRASH_WORDS.search(line)]
    return (named or said)[-1][:limit]


def exit_text(code: int) -> str:
    """A worker's exit status: a signal by its name."""
    if code < 0:
        try:
            return f"{code} ({signal.Signals(-code).name})"
        except ValueError:
            pass
    return str(code)


def log_name(key: CellKey) -> str:
    """A cell's log, relative to the run folder: one file name per cell."""
    on = "" if key.vllm == DEFAULT_VLLM else f"-vllm-{key.vllm}"
    name = f"{key.fixture}-{key.subject}-{key.check}-transformers-{key.version}{on}"
    return f"{LOGS}/{re.sub(r'[^A-Za-z0-9._+-]', '-', name)}.log"


def write_log(folder: Path, verdict: Verdict, output: Iterable[str]) -> Verdict:
    """A bad cell's log (its verdict, then `output`: what its process printed while it ran)
    in `folder`, named in the verdict it returns; any other verdict as it is."""
    if verdict.status not in BAD:
        return verdict
    name = log_name(verdict.key)
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as log:
        log.write(f"cell: {verdict.key.label()}\nverdict: {verdict.status} "
                  f"({verdict.seconds:.1f} s): {verdict.detail}\n"
                  "--- what the cell's process printed while it ran ---\n")
        log.writelines(output)
    return replace(verdict, log=name)


@contextmanager
def captured(stream: TextIO) -> Iterator[None]:
    """Everything this process prints into `stream` (a file): its stdout and stderr, both the
    file descriptors (C extensions, Triton, child processes) and Python's streams."""
    for open_stream in (sys.stdout, sys.stderr):
        open_stream.flush()
    saved = os.dup(1), os.dup(2)
    try:
        os.dup2(stream.fileno(), 1)
        os.dup2(stream.fileno(), 2)
        with redirect_stdout(stream), redirect_stderr(stream):
            yield
    finally:
        for open_stream in (sys.stdout, sys.stderr, stream):
            open_stream.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)


def in_process(folder: Path | None, run: Callable[[], Verdict]) -> Verdict:
    """One cell run in this process with its output captured: kept in its log under `folder`
    when the cell is bad, dropped otherwise. `folder` None: nothing captured."""
    if folder is None:
        return run()
    (folder / LOGS).mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("a", dir=folder / LOGS, prefix=".cell-", suffix=".log",
                                     delete=False) as stream:
        try:
            with captured(stream):
                verdict = run()
        finally:
            stream.close()
            output = Path(stream.name).read_text(errors="replace")
            os.unlink(stream.name)
    return write_log(folder, verdict, [output])
