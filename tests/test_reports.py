"""Every report format from one set of verdicts; the gate; merging shards."""

import html
import json
from xml.etree import ElementTree

from conformance.core.signatures import signature
from conformance.paths import ROOT
from conformance.results import gate, gate_report, portable, report
from conformance.results.evidence import CUT, Evidence
from conformance.results.judge import upgrade
from conformance.results.verdict import Verdict

NEWLINES = "gemma3-offsets-newlines"  # a finding in findings.toml
NEWLINES_TITLE = "Gemma3, Offsets path: newlines at a replacement's edges stay unmerged"


def verdicts():
    return [
        Verdict("llava", "5.12.1", "cache", "pass", subject="impl", seconds=0.5),
        Verdict("llava", "5.17.0", "cache", "pass", subject="impl", seconds=0.4),
        Verdict("gemma3", "5.17.0", "prompt-ids", "xfail", "newline merge [observed: x]",
                subject="vllm-backend"),
        Verdict("idefics3", "5.20.2", "model", "fail", "greedy token differs: 3 vs 4",
                data={"reproducer": "/nonexistent/repro.py"}),
        Verdict("qwen3_vl", "5.12.1", "cache", "n/a", "not in 5.12.1", subject="impl"),
    ]


def with_findings():
    """verdicts() plus two cells of one finding (the way the judge records them now)."""
    return verdicts() + [
        Verdict("gemma3", "5.17.0", check, "xfail", "Offsets path: ... [observed: ids differ]",
                subject=subject, finding=NEWLINES)
        for subject, check in (("impl", "placeholders"), ("vllm-backend", "placeholders"))]


META = {"versions": ["5.12.1", "5.17.0", "5.20.2"], "profile": "ci", "device": "cuda",
        "dtype": "bfloat16", "finished": "2026-11-30T03:55:22+00:00", "seconds": 12.0,
        "checks": ["model", "prompt-ids", "placeholders", "cache"], "shard": "1/2"}


def test_results_json_round_trips(tmp_path):
    report.write_reports(tmp_path, verdicts(), {"seconds": 1.0})
    payload = json.loads((tmp_path / "results.json").read_text())
    assert payload["schema_version"] == report.SCHEMA_VERSION
    assert payload["summary"] == {"fail": 1, "n/a": 1, "pass": 2, "xfail": 1}
    back, meta = report.read_results(tmp_path)
    assert sorted(v.key for v in back) == sorted(v.key for v in verdicts())
    assert meta == {"seconds": 1.0}


def test_markdown_matrix_links_non_passing_cells_to_details():
    text = report.markdown(report.sort_cells(verdicts()))
    assert "| architecture | 5.12.1 | 5.17.0 | 5.20.2 |" in text
    assert "[✗1](#idefics3-5-20-2)" in text
    assert '<a id="idefics3-5-20-2"></a>' in text
    assert "greedy token differs: 3 vs 4" in text


def test_markdown_lists_known_failures_once_per_finding():
    text = report.markdown(report.sort_cells(with_findings()))
    section = text.split("## Known findings", 1)[1].split("## Details", 1)[0]
    assert f'<a id="finding-{NEWLINES}"></a>**{NEWLINES}** (2 cells): {NEWLINES_TITLE}' in section
    assert ("gemma3/impl/placeholders@5.17.0, gemma3/vllm-backend/placeholders@5.17.0"
            in section)
    assert "1 cell `xfail` without a finding id" in section  # an old result, listed per cell
    details = text.split("## Details", 1)[1]
    # a known cell's details point at its finding; a bad cell's stay in full
    assert f"**impl / placeholders: xfail**: [{NEWLINES}](#finding-{NEWLINES})" in details
    assert "**vllm-backend / prompt-ids: xfail**: newline merge [observed: x]" in details
    assert "greedy token differs: 3 vs 4" in details


def test_junit_counts_failures_errors_and_skips():
    root = ElementTree.fromstring(report.junit(report.sort_cells(verdicts())).split("?>", 1)[1])
    suites = {s.get("name"): s for s in root}
    assert suites["transformers-5.20.2"].get("failures") == "1"
    assert suites["transformers-5.17.0"].get("skipped") == "1"
    assert len(root.findall(".//testcase")) == 5
    named = ElementTree.fromstring(report.junit(with_findings()).split("?>", 1)[1])
    assert any(f"xfail [{NEWLINES}]:" in s.get("message") for s in named.iter("skipped"))


def test_html_is_one_file_with_filters_and_findings():
    page = report.html_report(report.sort_cells(verdicts()))
    assert "<script>" in page and "http" not in page.split("<body>")[0]
    assert "id='filters'" in page and "value='fail'" in page
    # every cell is one row of the cells table, its whole evidence in it
    assert "<tr id='cell-idefics3-5-20-2-vllm-backend-model' class='fail' data-status='fail'>" \
        in page
    assert "reproducer not found" in page


def test_html_opens_with_a_summary_of_the_run():
    page = report.html_report(report.sort_cells(with_findings()), META)
    body = page.split("<body>", 1)[1]
    assert body.index("id='summary'") < body.index("<table id='matrix'>")
    summary = body.split("id='summary'", 1)[1].split("</section>", 1)[0]
    for shown in ("5.12.1, 5.17.0, 5.20.2", "4: gemma3, idefics3, llava, qwen3_vl",
                  "2: impl, vllm-backend", "ci", "cuda / bfloat16", "2026-11-30T03:55:22",
                  "12 s for 7 cells", "shard", "1/2", "pass 2", "xfail 3", "fail 1"):
        assert shown in summary, shown
    assert '{"' not in page  # the meta is worded, never dumped as JSON
    known = body.split("<table id='known'>", 1)[1].split("</table>", 1)[0]
    row = known.split(f"<tr id='finding-{NEWLINES}' data-finding='{NEWLINES}'>", 1)[1]
    row = row.split("</tr>", 1)[0]
    assert html.escape(NEWLINES_TITLE) in row and "2 cells" in row
    assert "gemma3/impl/placeholders@5.17.0" in row
    assert "without a finding id" in known


def test_html_shows_architectures_by_checks_for_each_version():
    page = report.html_report(report.sort_cells(with_findings()), META)
    for version in ("5.12.1", "5.17.0", "5.20.2"):
        assert f"<table class='checks' data-version='{version}'>" in page
    table = page.split("<table class='checks' data-version='5.17.0'>", 1)[1].split("</table>")[0]
    # the run's own check order, only the checks present on that version
    assert "<th class='nosort'>prompt-ids</th><th class='nosort'>placeholders</th>" \
           "<th class='nosort'>cache</th></tr>" in table
    cell = table.split("data-fixture='gemma3' data-check='placeholders'", 1)[1].split("</td>")[0]
    assert cell.startswith(" title='impl: xfail [gemma3-offsets-newlines]: Offsets path")
    assert cell.count("<a class='xfail' href='#cell-gemma3-5-17-0-") == 2
    failing = page.split("<table class='checks' data-version='5.20.2'>", 1)[1]
    assert ("<td class='fail' data-status='fail' data-fixture='idefics3' data-check='model' "
            "title='vllm-backend: fail: greedy token differs: 3 vs 4'>") in failing


def test_gate_fails_on_a_regression_and_lists_fixes_and_known():
    baseline = verdicts()
    current = [Verdict(**{**v.__dict__}) for v in baseline]
    current[1].status, current[1].detail = "fail", "cache: hash depends on its neighbours"
    current[3].status = "pass"
    result = gate.compare(baseline, current)
    assert not result.ok
    assert [now.key.fixture for _, now in result.regressions] == ["llava"]
    assert [now.key.fixture for _, now in result.fixed] == ["idefics3"]
    text = gate_report.render(result)
    assert "REGRESSIONS (1)" in text and "hash depends on its neighbours" in text
    assert "KNOWN FAILURES (1)" in text and "gate: FAIL" in text
    assert gate.compare(baseline, baseline).ok


def test_gate_groups_known_failures_by_finding_and_names_newly_known_ones():
    baseline = [v for v in with_findings() if v.subject == "impl" or v.finding != NEWLINES]
    baseline += [Verdict("gemma3", "5.17.0", "placeholders", "pass")]  # vllm-backend's passed
    result = gate.compare(baseline, with_findings(), accept=frozenset({NEWLINES}))
    assert result.ok  # a known failure is no failure of the gate once accepted
    assert [now.subject for _, now in result.accepted] == ["vllm-backend"]
    lines = gate_report.render(result).splitlines()
    at = lines.index("KNOWN FAILURES (3), by the 1 finding(s) that explain them")
    assert lines[at + 1:at + 6] == [
        f"  {NEWLINES} (2 cells): {NEWLINES_TITLE}",
        "    gemma3/impl/placeholders@5.17.0, gemma3/vllm-backend/placeholders@5.17.0",
        "  without a finding id (1 cell)",
        "    gemma3 / vllm-backend / prompt-ids / transformers 5.17.0: newline merge "
        "[observed: x]",
        "gate: PASS"]
    newly = lines.index("NEWLY KNOWN, accepted (1): passed in the baseline, a known failure now")
    assert lines[newly + 1] == ("  gemma3 / vllm-backend / placeholders / transformers 5.17.0: "
                                f"{NEWLINES}: {NEWLINES_TITLE}")


def test_a_newly_known_cell_fails_the_gate_unless_its_finding_is_accepted():
    baseline = [Verdict("gemma3", "5.17.0", "placeholders", "pass")]
    now = [Verdict("gemma3", "5.17.0", "placeholders", "xfail", "r [observed: ids differ]",
                   finding=NEWLINES)]
    refused = gate.compare(baseline, now)
    assert not refused.ok and [v.finding for _, v in refused.newly_known] == [NEWLINES]
    assert "NEWLY KNOWN (1): passed in the baseline, a known failure now, not accepted" \
        in gate_report.render(refused)
    assert not gate.compare(baseline, now, accept=frozenset({"another-finding"})).ok
    for accept in ({NEWLINES}, {"*"}):
        result = gate.compare(baseline, now, accept=frozenset(accept))
        assert result.ok and not result.newly_known and len(result.accepted) == 1


def known_cell(evidence: str, finding: str = NEWLINES,
               differences: list[str] | None = None) -> Verdict:
    """A known cell the way the judge records it: every difference (`differences`, else the
    evidence alone) explained by `finding`, the first shown."""
    return Verdict("gemma3", "5.17.0", "model", "xfail", finding=finding,
                   evidence=Evidence.of(differences or [evidence], finding))


DRIFT = "backend: top logprobs off by 3.13e-02 at position 2 (token 17)"


def test_a_known_cell_with_a_new_difference_fails_the_gate():
    was = known_cell(DRIFT, differences=[DRIFT])
    now = known_cell(DRIFT, differences=[DRIFT, "impl: prompt ids differ at position 4"])
    result = gate.compare([was], [now])
    assert not result.ok and result.known_compared == 1
    [change] = result.known_changed
    assert change.reasons == ["a new difference: impl: prompt ids differ at position 4"]
    text = gate_report.render(result)
    assert "KNOWN IN BOTH, CHANGED (1)" in text and "gate: FAIL" in text
    # an integer is part of what differs: another position is another difference
    moved = known_cell(DRIFT.replace("position 2", "position 3"))
    assert not gate.compare([was], [moved]).ok
    # fewer differences now: listed, not a failure
    narrowed = gate.compare([now], [was])
    assert narrowed.ok and len(narrowed.narrowed) == 1
    assert "NARROWED (1)" in gate_report.render(narrowed)


def test_a_known_cell_another_finding_explains_now_fails_the_gate():
    result = gate.compare([known_cell(DRIFT)], [known_cell(DRIFT, finding="other-finding")])
    assert not result.ok
    assert result.known_changed[0].reasons == [f"another finding: other-finding (was {NEWLINES})"]


def test_a_known_cell_drifting_further_fails_the_gate_and_the_same_drift_passes():
    was = known_cell(DRIFT)
    assert gate.compare([was], [known_cell(DRIFT.replace("3.13e-02", "9.0e-01"))]
                        ).known_changed[0].reasons[0].startswith("a larger drift: 0.9 (was 0.0313)")
    for same in ("3.13e-02", "3.4e-02", "0.0011"):  # within 10%, or smaller
        assert gate.compare([was], [known_cell(DRIFT.replace("3.13e-02", same))]).ok, same
    for beyond in ("3.5e-02", "nan", "inf"):
        assert not gate.compare([was], [known_cell(DRIFT.replace("3.13e-02", beyond))]).ok


def test_an_old_baseline_cell_is_compared_by_the_evidence_in_its_detail():
    # a schema-1 cell kept its evidence in its detail: read back once (judge.upgrade)
    tricky = "ids [1, 2] vs [1, 3] at position 1 (of [2]) off by 0.5"
    cell = {"fixture": "gemma3", "version": "5.17.0", "check": "model", "status": "xfail",
            "detail": f"reason [observed: {tricky}] (with do_pan_and_scan=[True]) "
                      "(+2 other distinct failure(s))",
            "data": {"differences": [tricky, "b", "c"]}, "finding": NEWLINES,
            "subject": "vllm-backend", "seconds": 0.0, "vllm": "0.31.0"}
    old = Verdict.from_dict(upgrade(cell))
    assert old.evidence is not None and old.evidence.shown_text == tricky
    assert old.evidence.first.options == (("do_pan_and_scan", "[True]"),)
    assert old.detail.endswith(f"[observed: {tricky}] (with do_pan_and_scan=[True]) "
                               "(+2 other distinct failure(s))")
    assert [d.text for d in gate.differences(Verdict("a", "1", "c", "crash", "no evidence"))
            ] == ["no evidence"]
    old = known_cell(tricky)
    now = known_cell(tricky, differences=[tricky.replace("0.5", "0.52")])
    assert gate.compare([old], [now]).ok
    assert not gate.compare([old], [known_cell(tricky.replace("[1, 3]", "[1, 4]"))]).ok
    # a long evidence, kept cut at 300 now, with a shorter measured value before the cut
    long = DRIFT + "; " + "the rest of a long evidence " * 12
    cut = long.replace("3.13e-02", "0.03")[:CUT]
    assert gate.compare([known_cell(long)], [known_cell(cut, differences=[cut])]).ok


def test_a_set_of_names_printed_in_another_order_is_the_same_difference():
    # vLLM lists unmapped weights as a Python set: its order follows the process's string
    # hashes, and the judge's cut keeps whichever names come first
    said = ("backend: ValueError: There is no module or parameter named 'embed_tokens' in M. "
            "The available parameters are: {'a.weight', 'b.bias', 'c.weight'}")
    shuffled = said.replace("'a.weight', 'b.bias', 'c.weight'", "'c.weight', 'a.weight', 'b.bias'")
    assert gate.compare([known_cell(said, differences=[said])],
                        [known_cell(shuffled, differences=[shuffled])]).ok
    long = said.replace("'c.weight'", ", ".join(f"'layer.{i}.weight'" for i in range(40)))
    cut, other = long[:CUT], long.replace("'a.weight', ", "")[:CUT]
    assert cut != other
    assert gate.compare([known_cell(cut, differences=[cut])],
                        [known_cell(other, differences=[other])]).ok
    # another name in the message outside the set is still another difference
    renamed = shuffled.replace("'embed_tokens'", "'lm_head'")
    assert not gate.compare([known_cell(said, differences=[said])],
                            [known_cell(renamed, differences=[renamed])]).ok
    # a dict of options is no set: its values stay part of what differs
    assert signature("request options {'max_pixels': 784}: x") != signature(
        "request options {'max_pixels': 785}: x")


def test_the_gate_says_how_many_cells_it_compared():
    baseline = verdicts()
    current = baseline[1:] + [Verdict("llava", "5.24.0", "cache", "pass", subject="impl")]
    first, second = gate_report.render(gate.compare(baseline, current)).splitlines()[:2]
    # 5.24.0 is compared with the baseline's 5.20.2, where llava has no cache cell
    assert first == ("compared 4 cells with the baseline (1 only in this run, 2 only in the "
                     "baseline: not compared); xfail in both: 1, findings and signatures compared")
    assert second.startswith("transformers 5.24.0 is not in the baseline: compared with its "
                             "nearest not newer, 5.20.2")


def test_a_long_list_of_known_cells_is_wrapped_between_labels():
    cells = [Verdict(f"fixture{i}", "5.17.0", "placeholders", "xfail", subject="vllm-backend",
                     finding=NEWLINES) for i in range(12)]
    text = gate_report.render(gate.compare([], cells))
    labels = [line for line in text.splitlines() if line.startswith("    fixture")]
    assert len(labels) > 1 and all(len(line) <= 100 for line in labels)
    assert ", ".join(line.strip().rstrip(",") for line in labels).count("@5.17.0") == 12


def test_latest_verdict_wins_when_cells_repeat():
    first = Verdict("llava", "5.17.0", "cache", "crash", subject="impl")
    again = Verdict("llava", "5.17.0", "cache", "pass", subject="impl")
    assert report.latest_per_cell([first, again]) == [again]


def test_a_candidate_release_is_gated_against_the_pinned_version():
    baseline = [Verdict("llava", "5.17.0", "cache", "pass", subject="impl")]
    candidate = [Verdict("llava", "5.24.0", "cache", "fail", "hash", subject="impl")]
    # not in the baseline: compared with its nearest version, 5.17.0
    assert [now.version for _, now in gate.compare(baseline, candidate).regressions] == [
        "5.24.0"]
    result = gate.compare(baseline, candidate, baseline_version="5.17.0")
    assert [now.version for _, now in result.regressions] == ["5.24.0"]


def strings_in(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)
    elif isinstance(value, str):
        yield value


def test_the_committed_baseline_names_no_absolute_path():
    payload = json.loads((ROOT / "reports" / "baseline.json").read_text())
    absolute = [text for text in strings_in(payload) if text.startswith("/")]
    assert not absolute, absolute[:3]


def test_paths_are_recorded_relative_to_the_repository(tmp_path):
    inside, outside = str(ROOT / "reports" / "repro" / "x.py"), str(tmp_path / "y.py")
    assert portable.repo_relative(inside) == "reports/repro/x.py"
    assert portable.repo_relative(outside) == outside  # only what lies inside is rewritten
    assert portable.source_name(str(ROOT / "reports" / "runs" / "latest")) == \
        "reports/runs/latest"
    assert portable.source_name(str(tmp_path / "col517")) == "col517"
    cells = portable.portable_cells([Verdict("llava", "5.17.0", "cache", "fail",
                                             data={"reproducer": inside, "examples": 3})])
    assert cells[0].data == {"reproducer": "reports/repro/x.py", "examples": 3}
    meta = portable.portable_meta({"merged_from": [str(tmp_path / "1")], "seconds": 1.0,
                                   "nested": {"checkpoint": "owner/name"}})
    assert meta == {"merged_from": ["1"], "seconds": 1.0, "nested": {"checkpoint": "owner/name"}}


def test_a_cell_that_is_the_checkpoints_problem_says_so_in_both_reports():
    owner = {"owner": "the checkpoint's problem", "part": "weights",
             "cause": "no weights file in the folder", "error": ""}
    cells = [Verdict("llava", "5.17.0", "model", "error",
                     "OSError: no file named model.safetensors", data={"owner": owner})]
    line = "the checkpoint's problem, not the backend's: no weights file in the folder"
    assert f"**vllm-backend / model: error** ({line}):" in report.markdown(cells)
    assert f"<p class='owner'>{html.escape(line, quote=True)}</p>" in report.html_report(cells, {})
