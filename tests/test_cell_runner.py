"""One cell runner: `run`, `check` and `bisect` run every cell through `run/cell.py`.

`run` and `bisect` hand their cells to workers, which run each with `run_cell`; `check` runs its
checkpoint's cells in its own process with `run_here`, which calls `run_cell` too. The judge is
called for a cell only by the runner's two halves (checkpoint-level cells in `run/cell.py`, the
suites in `run/suite.py`), and no command line module runs a cell itself: checked on the source,
by AST, with a planted second loop the scan must catch. A cell's key and its fault travel with
the cell's work description (`run/plan.py`'s `Cell`): the fault is parsed once, by the command.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.results.verdict import CellKey, Verdict
from conformance.run import cell as runner
from conformance.run.plan import Cell, Checkpoint, checkpoint_cells
from conformance.subjects.faults import Fault
from fixtures.registry import get_recipe

ROOT = Path(__file__).resolve().parents[1]
# Who may call what runs or judges a cell (paths under the repository root)
CALLERS = {
    "run_cell": {"conformance/run/cell.py", "conformance/run/worker.py"},
    "run_suite": {"conformance/run/cell.py"},
    "run_checkpoint": {"conformance/run/cell.py"},
    "judge": {"conformance/run/cell.py", "conformance/run/suite.py"},
}
PARSERS = {"conformance/cli/run.py", "conformance/cli/bisect.py", "conformance/results/repro.py"}


def calls(path: Path) -> list[tuple[int, str]]:
    """(line, name) of each call of a name in CALLERS, or of `Fault.parse`, that an import
    of the module binds (`run_suite(...)`, `runner.run_cell(...)`; not `self.judge(...)`)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    bound = {alias.asname or alias.name.split(".")[0] for node in ast.walk(tree)
             if isinstance(node, ast.Import | ast.ImportFrom) for alias in node.names}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in CALLERS and func.id in bound:
            found.append((node.lineno, func.id))
        elif (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
              and func.value.id in bound):
            if func.attr in CALLERS:
                found.append((node.lineno, func.attr))
            elif (func.value.id, func.attr) == ("Fault", "parse"):
                found.append((node.lineno, "Fault.parse"))
    return found


def strays(root: Path = ROOT) -> list[str]:
    """Calls that run or judge a cell outside the runner, or parse a fault outside the
    commands (results/ may call the judge: re-judging recorded verdicts runs no cell)."""
    found = []
    for path in sorted((root / "conformance").rglob("*.py")):
        where = path.relative_to(root).as_posix()
        for line, name in calls(path):
            allowed = PARSERS if name == "Fault.parse" else CALLERS[name]
            if where not in allowed and not (name == "judge" and where.startswith(
                    "conformance/results/")):
                found.append(f"{where}:{line} calls {name}")
    return found


def test_every_cell_is_run_and_judged_by_the_one_runner():
    found = strays()
    assert not found, "cells run outside run/cell.py (or faults parsed twice):\n" + \
        "\n".join(found)


def test_the_scan_catches_a_command_with_a_cell_loop_of_its_own(tmp_path):
    """The planted fault: `check` running its suites itself, as it once did."""
    for name, body in {
        "conformance/cli/check.py": (
            "from conformance.run.suite import run_suite\n"
            "from conformance.run import cell as runner\n"
            "def checked(keys):\n"
            "    for key in keys:\n"
            "        run_suite(key)\n"
            "        runner.run_checkpoint(key)\n"),
        "conformance/run/bisect.py": ("class Probes:\n"
                                      "    def __call__(self, v):\n"
                                      "        self.judge(v, None)\n"),
        "conformance/run/worker.py": ("from conformance.subjects.faults import Fault\n"
                                      "def main(spec):\n"
                                      "    return Fault.parse(spec)\n"),
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body)
    assert strays(tmp_path) == ["conformance/cli/check.py:5 calls run_suite",
                                "conformance/cli/check.py:6 calls run_checkpoint",
                                "conformance/run/worker.py:3 calls Fault.parse"]


def test_checks_cells_are_planned_in_the_registrys_order_on_its_checkpoint():
    checkpoint = Checkpoint("/somewhere", get_recipe("llava"))
    cells = checkpoint_cells(checkpoint, ("prompt-ids", "processing"), ("impl", "vllm-backend"),
                             "5.17.0", "0.31.0")
    assert [(c.key.subject, c.key.check) for c in cells] == [
        ("vllm-backend", "processing"), ("impl", "prompt-ids"), ("vllm-backend", "prompt-ids")]
    assert {(c.key.fixture, c.key.version, c.key.vllm) for c in cells} == {
        ("llava", "5.17.0", "0.31.0")}
    assert all(c.checkpoint is checkpoint and c.fault is None for c in cells)
    with pytest.raises(ValueError, match="runs in its process"):
        cells[0].to_json()  # a checkpoint's cell never goes to a worker


def test_check_runs_its_cells_through_run_cell_in_its_own_process(monkeypatch, tmp_path):
    ran, seen = [], []

    def run_cell(cell: Cell, repro_dir=None) -> Verdict:
        ran.append(cell)
        print("vLLM's noise")  # kept in the bad cell's log, not on the terminal
        return Verdict.of(cell.key, "fail" if cell.key.subject == "impl" else "pass", "ids")

    monkeypatch.setattr(runner, "run_cell", run_cell)
    cells = checkpoint_cells(Checkpoint("/ckpt", get_recipe("llava")), ("prompt-ids",),
                             ("impl", "vllm-backend"), "5.17.0", "0.31.0")
    verdicts = runner.run_here(cells, tmp_path, seen.append)
    assert ran == cells and seen == verdicts
    assert [v.status for v in verdicts] == ["fail", "pass"]
    assert "vLLM's noise" in Path(tmp_path, verdicts[0].log).read_text()


KEY = CellKey("llava", "5.17.0", "impl", "placeholders")


def test_a_fault_is_parsed_once_and_travels_routed_with_its_cells():
    fault = Fault.parse("offset-shift>=5.16.1")
    assert (fault.name, fault.since, str(fault)) == ("offset-shift", "5.16.1",
                                                     "offset-shift>=5.16.1")
    sent = json.loads(json.dumps(Cell.of(KEY, fault).to_json()))  # as a worker reads it
    assert sent == {"key": list(KEY), "fault": {"name": "offset-shift", "since": "5.16.1"}}
    assert Cell.from_json(sent) == Cell(KEY, fault)
    # not planted before its version, nor in another subject's cell
    assert Cell.of(KEY._replace(version="5.12.1"), fault).fault is None
    assert Cell.of(KEY._replace(subject="vllm-backend"), fault).fault is None
    assert Cell.from_json({"key": list(KEY)}) == Cell(KEY)
    assert Fault("swapped-items").media is not None and Fault("offset-shift").media is None


def test_an_unknown_fault_is_a_one_line_error_before_any_cell(capsys):
    from conformance.cli import main

    with pytest.raises(ValueError, match="unknown fault 'no-such-fault' \\(known: "):
        Fault.parse("no-such-fault>=5.16.1")
    with pytest.raises(ValueError, match="not a version"):
        Fault.parse("offset-shift>=soon")
    assert main(["run", "--fixtures", "llava", "--fault", "no-such-fault"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: unknown fault 'no-such-fault' (known: no-unpad, ")


def test_a_worker_imports_its_runner_without_torch():
    """The worker pins its CPUs and caps the kernels' instruction set before torch loads
    (`worker.main`): importing it, and with it the cell runner, loads none of torch,
    transformers or vLLM."""
    code = ("import sys, conformance.run.worker; "
            "print(sorted({'torch', 'transformers', 'vllm'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin"})
    assert out.stdout.strip() == "[]", out.stderr
