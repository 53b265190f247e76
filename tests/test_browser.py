"""report.html in a real browser: headless Chromium shows the summary, the per-version tables,
the matrix and a failure's details."""

import shutil
import subprocess

import pytest

from conformance.results import report
from conformance.results.verdict import Verdict

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it)")
def test_report_html_renders_matrix_and_failure_details(tmp_path):
    cells = [
        Verdict("llava", "5.17.0", "cache", "pass", subject="impl"),
        Verdict("idefics3", "5.20.2", "model", "fail", "greedy token differs: 3 vs 4"),
        Verdict("gemma3", "5.17.0", "prompt-ids", "xfail", "newlines [observed: x]",
                finding="gemma3-offsets-newlines"),
    ]
    page = tmp_path / "report.html"
    page.write_text(report.html_report(report.sort_cells(cells), {"profile": "ci"}))
    # --dump-dom prints the DOM after scripts ran: what a person would see
    dom = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=True).stdout
    assert dom.index('<section id="summary">') < dom.index('<table id="matrix">')
    assert ">ci<" in dom  # the profile, worded in the summary
    assert '<tr data-finding="gemma3-offsets-newlines">' in dom
    assert '<table class="checks" data-version="5.17.0">' in dom
    assert '<table class="checks" data-version="5.20.2">' in dom
    assert 'data-cell="idefics3|5.20.2"' in dom and "✗1" in dom
    assert "greedy token differs: 3 vs 4" in dom
    assert 'class="finding" data-status="fail"' in dom and 'style="display: none;"' not in dom
