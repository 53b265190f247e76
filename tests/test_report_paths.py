"""No absolute path in any artifact: a run folder's files record paths relative to the folder
(so it can be moved or downloaded as a CI artifact and its links still work), and a reproducer
finds the harness from the environment that runs it, not from a path of the machine it was
written on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.inputs.cases import Case
from conformance.inputs.media import Media
from conformance.paths import ROOT
from conformance.results import report
from conformance.results.portable import folder_meta, folder_relative
from conformance.results.repro import write_reproducer
from conformance.results.verdict import Verdict


def machine_paths(folder: Path, *roots: Path) -> dict[str, list[str]]:
    """Each file under `folder` that names one of `roots` (as given or resolved), and which."""
    names = {str(p) for root in roots for p in (root, root.resolve())}
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            text = path.read_text(errors="replace")
            if hits := sorted(name for name in names if name in text):
                found[str(path.relative_to(folder))] = hits
    return found


def test_the_scan_finds_a_planted_absolute_path(tmp_path):
    (tmp_path / "a.txt").write_text(f"sys.path.insert(0, {str(ROOT)!r})")
    (tmp_path / "b.txt").write_text("repro/x.py")
    assert machine_paths(tmp_path, ROOT) == {"a.txt": [str(ROOT)]}


def test_a_run_folder_records_its_paths_relative_to_itself(tmp_path):
    run = tmp_path / "run"
    repro = run / "repro" / "llava-model-1234abcd.py"
    repro.parent.mkdir(parents=True)
    repro.write_text("print('replay')\n")
    cell = Verdict("llava", "5.17.0", "model", "fail", "greedy token differs",
                   data={"reproducer": str(repro), "examples": 3},
                   log=str(run / "logs" / "llava-model.log"))
    report.append(run / "results.jsonl", cell)  # as the session records it, absolute
    report.write_reports(run, [cell], {"checkpoint": str(tmp_path / "ckpt"),
                                       "merged_from": [str(run / "shard1"), "shard2"],
                                       "seconds": 1.0})
    assert machine_paths(run, tmp_path, ROOT) == {}
    written = json.loads((run / "results.json").read_text())
    assert written["cells"][0]["data"] == {"reproducer": "repro/llava-model-1234abcd.py",
                                           "examples": 3}
    assert written["cells"][0]["log"] == "logs/llava-model.log"
    # a checkpoint elsewhere is named, not located; a path inside the folder stays reachable
    assert written["meta"]["checkpoint"] == "ckpt"
    assert written["meta"]["merged_from"] == ["shard1", "shard2"]
    (back,) = report.read_partial(run / "results.jsonl")
    assert back.data["reproducer"] == "repro/llava-model-1234abcd.py"
    assert "Reproducer: `repro/llava-model-1234abcd.py`. Log: `logs/llava-model.log`." in \
        (run / "report.md").read_text()
    assert "(whole output: logs/llava-model.log)" in (run / "junit.xml").read_text()


def test_a_path_outside_the_run_folder_is_recorded_relative_to_it(tmp_path):
    """`check --export-repro DIR`: a link that works while both stay where they are."""
    run, exported = tmp_path / "report", tmp_path / "exported" / "x.py"
    assert folder_relative(str(exported), run) == "../exported/x.py"
    assert folder_relative("repro/x.py", run) == "repro/x.py"  # already relative to it
    assert folder_meta({"checkpoint": str(ROOT / "reports" / "x"), "n": 1}, run) == \
        {"checkpoint": "reports/x", "n": 1}


def reproducer(folder: Path) -> Path:
    case = Case("llava", "image", ("", ""), (Media("image", 16, 16, seed=0),))
    return write_reproducer(folder, check="prompt-ids", subject="vllm-backend",
                            fault="backend-bos-doubled", case=case, version="5.17.0",
                            evidence="prompt ids differ at position 1")


def test_a_reproducer_names_no_path_and_says_when_the_harness_is_missing(tmp_path):
    script = reproducer(tmp_path / "repro")
    assert machine_paths(tmp_path, tmp_path, ROOT) == {}
    assert "sys.path" not in script.read_text()
    # no site-packages (-S) and no script folder's neighbours: the harness is not importable
    run = subprocess.run([sys.executable, "-I", "-S", str(script)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stderr
    (line,) = run.stderr.splitlines()
    assert "the harness (vllm-mm-conformance) is not importable here" in line


@pytest.mark.vllm
@pytest.mark.e2e
def test_a_narrow_run_writes_no_absolute_path_and_its_reproducer_runs_elsewhere(tmp_path):
    """One failing cell end to end. Its reproducer is under the run folder's repro/ (none in
    the repository's reports/), its log under logs/, both named relative to the folder; the CI
    log (no TTY) is one unwrapped line per cell with N/total. Every file the run writes
    (results, reports, logs, reproducers) is free of the clone's folder and of the run
    folder's; the folder moved elsewhere still replays its failure (a fault impl plants itself,
    which its reproducer plants again)."""
    started = time.time()
    out = tmp_path / "run"
    run = subprocess.run(
        [sys.executable, "-m", "conformance", "run", "--vllm", "0.31.0", "--fixtures", "llava",
         "--versions", "5.17.0", "--subjects", "impl", "--checks", "placeholders", "--jobs", "1",
         "--fault", "offset-shift", "--output", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]  # the planted fault
    lines = [line for line in run.stdout.splitlines() if line.startswith("[1/1]")]
    assert lines == ["[1/1]    fail  llava / impl / placeholders / transformers 5.17.0 "
                     + lines[0].split("5.17.0 ", 1)[1]]
    assert machine_paths(out, ROOT, tmp_path) == {}
    cells = json.loads((out / "results.json").read_text())["cells"]
    (cell,) = cells
    assert cell["status"] == "fail" and cell["data"]["reproducer"].startswith("repro/")
    assert cell["log"].startswith("logs/") and (out / cell["log"]).exists()
    assert (out / cell["data"]["reproducer"]).exists()
    assert not [p for p in (ROOT / "reports" / "repro").glob("*.py")
                if p.stat().st_mtime >= started]
    moved = tmp_path / "elsewhere"
    os.rename(out, moved)  # as a CI artifact, downloaded
    replay = subprocess.run([sys.executable, cell["data"]["reproducer"]], cwd=moved,
                            capture_output=True, text=True, timeout=600)
    assert replay.returncode == 1, replay.stdout[-2000:] + replay.stderr[-2000:]
    assert "placeholders: FAILS" in replay.stdout
