"""Every report format from one set of verdicts; the gate; merging shards."""

import json
from xml.etree import ElementTree

from conformance.results import gate, report
from conformance.results.verdict import Verdict


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


def test_junit_counts_failures_errors_and_skips():
    root = ElementTree.fromstring(report.junit(report.sort_cells(verdicts())).split("?>", 1)[1])
    suites = {s.get("name"): s for s in root}
    assert suites["transformers-5.20.2"].get("failures") == "1"
    assert suites["transformers-5.17.0"].get("skipped") == "1"
    assert len(root.findall(".//testcase")) == 5


def test_html_is_one_file_with_filters_and_findings():
    page = report.html_report(report.sort_cells(verdicts()))
    assert "<script>" in page and "http" not in page.split("<body>")[0]
    assert "id='filters'" in page and "value='fail'" in page
    assert "class='finding' data-status='fail'" in page
    assert "reproducer not found" in page


def test_gate_fails_on_a_regression_and_lists_fixes_and_known():
    baseline = verdicts()
    current = [Verdict(**{**v.__dict__}) for v in baseline]
    current[1].status, current[1].detail = "fail", "cache: hash depends on its neighbours"
    current[3].status = "pass"
    result = gate.compare(baseline, current)
    assert not result.ok
    assert [now.key.fixture for _, now in result.regressions] == ["llava"]
    assert [now.key.fixture for _, now in result.fixed] == ["idefics3"]
    text = gate.render(result)
    assert "REGRESSIONS (1)" in text and "hash depends on its neighbours" in text
    assert "KNOWN FAILURES (1)" in text and "gate: FAIL" in text
    assert gate.compare(baseline, baseline).ok


def test_latest_verdict_wins_when_cells_repeat():
    first = Verdict("llava", "5.17.0", "cache", "crash", subject="impl")
    again = Verdict("llava", "5.17.0", "cache", "pass", subject="impl")
    assert report.latest_per_cell([first, again]) == [again]


def test_a_candidate_release_is_gated_against_the_pinned_version():
    baseline = [Verdict("llava", "5.17.0", "cache", "pass", subject="impl")]
    candidate = [Verdict("llava", "5.24.0", "cache", "fail", "hash", subject="impl")]
    assert gate.compare(baseline, candidate).new_failures  # unknown cell: still not green
    result = gate.compare(baseline, candidate, baseline_version="5.17.0")
    assert [now.version for _, now in result.regressions] == ["5.24.0"]
