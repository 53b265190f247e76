"""`conformance gate` as a user runs it: which baseline column each run column is compared with,
no verdict without a compared cell, a summary that fits a screen, and `--json`."""

import json
from pathlib import Path

import pytest

from conformance import expectations
from conformance.cli import main
from conformance.results import gate, report
from conformance.results.judge import Failure, judge
from conformance.results.verdict import CellKey, Verdict

ROOT = Path(__file__).resolve().parent.parent
NEWLINES = "gemma3-offsets-newlines"  # a finding in findings.toml
CHECKS = ("prompt-ids", "placeholders", "cache")


def cells(version: str, status: str = "pass", detail: str = "", vllm: str = "0.31.0",
          fixtures: tuple[str, ...] = ("llava", "gemma3")) -> list[Verdict]:
    return [Verdict(fixture, version, check, status, detail, subject=subject, vllm=vllm)
            for fixture in fixtures for check in CHECKS for subject in ("impl", "vllm-backend")]


def write(path: Path, verdicts: list[Verdict]) -> str:
    path.mkdir(parents=True, exist_ok=True)
    report.write_results(path / "results.json", verdicts, {})
    return str(path)


@pytest.fixture
def baseline(tmp_path) -> list[str]:
    """A baseline of two transformers versions, every cell passing."""
    return ["--baseline", write(tmp_path / "baseline", cells("5.17.0") + cells("5.20.2"))]


def gate_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["gate", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_nearest_is_the_newest_not_newer_else_the_oldest():
    available = ["5.12.1", "5.17.0", "5.20.2", "5.24.0"]
    assert gate.nearest("5.23.0", available) == "5.20.2"
    assert gate.nearest("5.25.0", available) == "5.24.0"
    assert gate.nearest("5.17.0", available) == "5.17.0"
    assert gate.nearest("5.10.4", available) == "5.12.1"  # none older: the nearest newer
    # the project's one parser: a pre-release of 5.20.2 is older than 5.20.2
    assert gate.nearest("5.20.2rc1", available) == "5.17.0"
    assert gate.nearest("5.3.0", ["5.12.1", "5.2.0"]) == "5.2.0"  # by version, not by text
    assert gate.nearest("5.17.0", []) is None


def test_a_version_outside_the_baseline_is_compared_with_the_nearest_and_says_so(
        tmp_path, baseline, capsys):
    # the candidate regressed: compared with nothing, it used to print PASS
    planted = cells("5.23.0")
    planted[0].status, planted[0].detail = "fail", "planted: prompt ids differ at position 3"
    run = write(tmp_path / "run", planted)
    code, out, _ = gate_cli(capsys, run, *baseline)
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith("compared 12 cells with the baseline (0 only in this run, 0 only")
    assert lines[1] == ("transformers 5.23.0 is not in the baseline: compared with its nearest "
                        "not newer, 5.20.2 (--baseline-version V to choose)")
    assert "REGRESSIONS (1)" in out and "planted: prompt ids differ at position 3" in out
    assert lines[-1] == "gate: FAIL"
    # an older version than any of the baseline's: the nearest, which is newer
    code, out, _ = gate_cli(capsys, write(tmp_path / "old", cells("5.12.1")), *baseline)
    assert code == 0 and "5.12.1 is not in the baseline: compared with its nearest (none is " \
        "older), 5.17.0" in out
    # --baseline-version still chooses, and says so
    code, out, _ = gate_cli(capsys, run, *baseline, "--baseline-version", "5.17")
    assert code == 1
    assert out.splitlines()[1] == ("transformers 5.23.0 compared with the baseline's 5.17.0 "
                                   "(--baseline-version)")
    # a version the baseline has is compared with itself: no line about it
    code, out, _ = gate_cli(capsys, write(tmp_path / "same", cells("5.20.2")), *baseline)
    assert code == 0 and len(out.splitlines()) == 2 and out.endswith("gate: PASS\n")


def test_a_vllm_outside_the_baseline_is_compared_with_the_nearest_release(
        tmp_path, baseline, capsys):
    now = cells("5.20.2", vllm="0.32.0")
    now[1].status, now[1].detail = "fail", "cache: hash depends on its neighbours"
    code, out, _ = gate_cli(capsys, write(tmp_path / "run", now), *baseline)
    assert code == 1
    assert "vLLM 0.32.0 is not in the baseline: compared with its nearest not newer, 0.31.0 " \
        "(--baseline-vllm V to choose)" in out
    # what moved between the two releases, as with --baseline-vllm
    assert "BETWEEN vLLM 0.31.0 AND vLLM 0.32.0" in out and "REGRESSIONS (1)" in out


def test_a_gate_that_compared_no_cell_exits_2_in_one_line_saying_what_to_do(
        tmp_path, baseline, capsys):
    # a clean run of fixtures the baseline lacks: nothing in common, never a pass
    run = write(tmp_path / "run", cells("5.20.2", fixtures=("newfix",)))
    code, out, err = gate_cli(capsys, run, *baseline)
    assert code == 2
    assert "gate: PASS" not in out and out.splitlines()[-1] == "gate: NO VERDICT (compared no cell)"
    assert out.startswith("compared 0 cells with the baseline")
    [line] = err.splitlines()
    assert line.startswith("error: gate compared no cell with ")
    assert "fixtures newfix" in line and "`conformance baseline RUN`" in line
    code, _, err = gate_cli(capsys, write(tmp_path / "empty", []), *baseline)
    assert code == 2 and "the run holds no cell: run `conformance run` first" in err
    code, _, err = gate_cli(capsys, run, *baseline, "--baseline-version", "5.99.0")
    assert code == 2 and err.strip() == (
        "error: the baseline has no cell of transformers 5.99.0 on vLLM 0.31.0 (it has 5.17.0, "
        "5.20.2): give one of those to --baseline-version")
    code, out, err = gate_cli(capsys, run, *baseline, "--json")
    assert code == 2 and json.loads(out)["status"] == "nothing-compared"
    assert json.loads(out)["reason"] in err


def many_failures(version: str) -> list[Verdict]:
    """Every cell bad: one cause across fixtures and checks (a release that cannot load), and
    one other cell failing otherwise."""
    now = cells(version, "error", "RuntimeError: Failed to import 'kernels' (version 0.17.2)")
    now[-1].status, now[-1].detail = "fail", "prompt ids differ at position 3: 7 vs 9"
    return now


def test_the_summary_groups_cells_by_cause_and_details_list_every_one(
        tmp_path, baseline, capsys):
    run = write(tmp_path / "run", many_failures("5.20.2"))
    code, out, _ = gate_cli(capsys, run, *baseline)
    assert code == 1
    lines = out.splitlines()
    at = lines.index("REGRESSIONS (12): passed in the baseline, bad now")
    assert lines[at + 1] == "  error: RuntimeError: Failed to import … … (11 cells)"
    assert lines[at + 2].startswith("    e.g. gemma3/impl/cache@5.20.2, ") and \
        lines[at + 2].endswith(" (+8 more)")
    # a group of one is the cell itself
    assert lines[at + 3] == ("  fail: gemma3 / vllm-backend / cache / transformers 5.20.2: "
                             "prompt ids differ at position 3: 7 vs 9")
    assert lines[-2:] == ["(every cell: --details)", "gate: FAIL"]
    code, details, _ = gate_cli(capsys, run, *baseline, "--details")
    assert code == 1 and "--details" not in details
    regressions = [line for line in details.splitlines() if line.startswith("  error: ")]
    assert len(regressions) == 11 and all("transformers 5.20.2: RuntimeError" in line
                                          for line in regressions)


def test_known_failures_are_summed_up_by_finding(tmp_path, capsys):
    known = [Verdict(f"fixture{i}", "5.17.0", "placeholders", "xfail", "r [observed: x]",
                     subject="vllm-backend", finding=NEWLINES) for i in range(12)]
    base = ["--baseline", write(tmp_path / "base", known)]
    code, out, _ = gate_cli(capsys, write(tmp_path / "run", known), *base)
    assert code == 0
    title = expectations.get(NEWLINES).title
    assert out.splitlines()[1:] == [
        "KNOWN FAILURES (12), by the 1 finding(s) that explain them",
        f"  {NEWLINES} (12 cells): {title}", "(every cell: --details)", "gate: PASS"]


def test_the_summary_of_the_whole_baseline_fits_a_screen(capsys):
    committed = str(ROOT / "reports" / "baseline.json")
    code, out, _ = gate_cli(capsys, committed)
    assert code == 0
    # the known cells by finding: one line each, and a few lines around them
    assert len(out.splitlines()) <= len(expectations.load()) + 6
    _, details, _ = gate_cli(capsys, committed, "--details")
    assert len(details.splitlines()) > 4 * len(out.splitlines())


def test_json_is_the_verdict_for_machines(tmp_path, baseline, capsys):
    now = many_failures("5.23.0")
    now[0].status = "xfail"
    now[0].finding = NEWLINES
    code, out, _ = gate_cli(capsys, write(tmp_path / "run", now), *baseline, "--json",
                            "--accept", NEWLINES)
    verdict = json.loads(out)
    assert code == verdict["exit_code"] == 1 and verdict["status"] == "fail"
    assert verdict["compared"] == 12 and verdict["only_in_run"] == 0
    assert verdict["baseline_columns"] == [{
        "vllm": "0.31.0", "version": "5.23.0", "baseline_vllm": "0.31.0",
        "baseline_version": "5.20.2", "vllm_rule": "same", "version_rule": "nearest"}]
    assert len(verdict["regressions"]) == 11 and len(verdict["accepted"]) == 1
    [last] = [r for r in verdict["regressions"] if r["now"]["status"] == "fail"]
    assert last["cell"] == {"fixture": "gemma3", "subject": "vllm-backend", "check": "cache",
                            "version": "5.23.0", "vllm": "0.31.0"}
    assert last["was"] == {"version": "5.20.2", "vllm": "0.31.0", "status": "pass",
                           "finding": "", "detail": ""}
    assert last["now"]["status"] == "fail" and "position 3" in last["now"]["detail"]
    assert verdict["improvements"] == [] and verdict["known"][0]["finding"] == NEWLINES
    # a fix is an improvement, with both statuses
    code, out, _ = gate_cli(capsys, write(tmp_path / "fixed", cells("5.23.0")), "--json",
                            "--baseline", write(tmp_path / "bad", now))
    verdict = json.loads(out)
    assert code == 0 and verdict["status"] == "pass" and len(verdict["improvements"]) == 12
    assert {(i["was"]["status"], i["now"]["status"]) for i in verdict["improvements"]} == {
        ("error", "pass"), ("fail", "pass"), ("xfail", "pass")}


def test_a_finding_past_its_last_measured_release_is_named_with_what_to_do(tmp_path, capsys):
    # a candidate release past a finding's upper bound shows the finding's very difference: the
    # judge does not stretch the bound (the cell fails), the gate says which finding it is
    seen = "0 placeholders for 1 items: a bare assertion instead of a clear error: " \
           "AssertionError('the prompt holds no placeholder left for item(s) image[0]')"
    was = judge(CellKey("llava", "5.25.0", "impl", "errors"), [Failure(seen)], exhaustive=True)
    assert (was.status, was.finding) == ("xfail", "offsets-bare-assert")
    assert expectations.get("offsets-bare-assert").versions == ">=5.15,<5.26"
    same = judge(CellKey("llava", "5.26.0", "impl", "errors"), [Failure(seen)], exhaustive=True)
    other = judge(CellKey("llava", "5.26.0", "impl", "errors"),
                  [Failure("prompt ids differ at position 3")], exhaustive=True)
    assert same.status == other.status == "fail"
    assert gate.outside_bounds(was, same) == (
        "offsets-bare-assert: the same difference, on a version its bounds (>=5.15,<5.26) "
        "leave out: confirm it on 5.26.0 and widen them")
    assert gate.outside_bounds(was, other) is None  # another difference: no such hint
    base = write(tmp_path / "baseline", [was])
    code, out, _ = gate_cli(capsys, write(tmp_path / "run", [same]), "--baseline", base)
    assert code == 1
    assert "[offsets-bare-assert: the same difference, on a version its bounds" in out
