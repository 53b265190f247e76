"""report.html in a real browser (headless Chromium, Debian's package): it shows the summary,
the per-version tables, the matrix and a failure's details, and a person clicking from the
summary's list of bad cells reaches the failing cell's evidence, and from a cell its finding's
entry. The clicks are real mouse events sent over Chromium's DevTools protocol (the standard
library and `websockets`, which vLLM brings; Playwright's and Selenium's browser downloads need
the network)."""

from __future__ import annotations

import contextlib
import itertools
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from conformance.results import report
from conformance.results.verdict import Verdict

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None,
                                    reason="chromium is not installed (.ci/run installs it)")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")
STALE = "smolvlm-no-token-count"  # a finding in findings.toml


def cells() -> list[Verdict]:
    return [
        Verdict("llava", "5.17.0", "cache", "pass", subject="impl"),
        Verdict("idefics3", "5.20.2", "model", "fail", "greedy token differs: 3 vs 4"),
        Verdict("gemma3", "5.17.0", "prompt-ids", "xfail", "newlines [observed: x]",
                finding="gemma3-offsets-newlines"),
        Verdict("smolvlm", "5.17.0", "processing", "xpass", "listed as known but passed: r",
                finding=STALE),
    ] + [Verdict("llava", "5.17.0", check, "pass") for check in ("a", "b", "c", "d", "e")]


def write_page(folder: Path) -> Path:
    page = folder / "report.html"
    page.write_text(report.html_report(report.sort_cells(cells()), {"profile": "ci"}, folder))
    return page


@needs_chromium
def test_report_html_renders_matrix_and_failure_details(tmp_path):
    page = write_page(tmp_path)
    # --dump-dom prints the DOM after scripts ran: what a person would see
    dom = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
         page.as_uri()], capture_output=True, text=True, timeout=120, check=True).stdout
    assert dom.index('<section id="summary">') < dom.index('<table id="matrix">')
    assert ">ci<" in dom  # the profile, worded in the summary
    assert '<tr id="finding-gemma3-offsets-newlines" data-finding="gemma3-offsets-newlines">' \
        in dom
    assert '<table class="checks" data-version="5.17.0">' in dom
    assert '<table class="checks" data-version="5.20.2">' in dom
    assert 'data-cell="idefics3|5.20.2"' in dom and "✗1" in dom
    assert "greedy token differs: 3 vs 4" in dom
    assert 'id="cell-idefics3-5-20-2-vllm-backend-model" class="fail" data-status="fail"' in dom
    assert 'style="display: none;"' not in dom


class Browser:
    """One page of a headless Chromium, driven over the DevTools protocol."""

    def __init__(self, url: str, profile: Path) -> None:
        from websockets.sync.client import connect

        self.process = subprocess.Popen(
            [CHROMIUM, *FLAGS, "--remote-debugging-port=0", f"--user-data-dir={profile}",
             "--window-size=1200,800", url],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = profile / "DevToolsActivePort"  # Chromium writes the port it chose here
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text().strip():
            assert time.monotonic() < deadline, "chromium opened no DevTools port in 60 s"
            assert self.process.poll() is None, "chromium exited at start"
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        while True:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list") as answer:
                pages = [t for t in json.load(answer) if t["type"] == "page"]
            if pages:
                break
            assert time.monotonic() < deadline, "chromium opened no page"
            time.sleep(0.1)
        self.socket = connect(pages[0]["webSocketDebuggerUrl"], max_size=None)
        self.ids = itertools.count(1)
        # the page may still be about:blank, complete, before it loads `url`
        self.wait_for(f"location.href === {json.dumps(url)} && "
                      "document.readyState === 'complete'")

    def send(self, method: str, **params) -> dict:
        sent = next(self.ids)
        self.socket.send(json.dumps({"id": sent, "method": method, "params": params}))
        while True:
            answer = json.loads(self.socket.recv(timeout=60))
            if answer.get("id") == sent:
                assert "error" not in answer, answer
                return answer["result"]

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def wait_for(self, condition: str, seconds: float = 30) -> None:
        deadline = time.monotonic() + seconds
        while not self.evaluate(f"Boolean({condition})"):
            assert time.monotonic() < deadline, f"not after {seconds} s: {condition}"
            time.sleep(0.05)

    def click(self, selector: str) -> None:
        """A person's click: the mouse pressed and released over the element, in view."""
        box = self.evaluate(
            f"(() => {{const e = document.querySelector({json.dumps(selector)});"
            "if (!e) return null; e.scrollIntoView({block: 'center'});"
            "const r = e.getBoundingClientRect();"
            "return r.width ? {x: r.x + r.width / 2, y: r.y + r.height / 2} : null;})()")
        assert box, f"nothing visible to click: {selector}"
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=box["x"], y=box["y"],
                      button="left", clickCount=1)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.socket.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# The element a link targeted, in view: its id and the text a person sees in it
TARGET = """(() => {const t = document.querySelector(':target'); if (!t) return null;
  const r = t.getBoundingClientRect();
  return {id: t.id, text: t.innerText, shown: t.offsetParent !== null,
          inView: r.top < innerHeight && r.bottom > 0};})()"""
# the target shown, and every <details> in it open (the page's handler runs after the jump)
SETTLED = """(() => {const t = document.querySelector(':target');
  return t && t.offsetParent !== null &&
    [...t.querySelectorAll('details')].every(d => d.open);})()"""


@needs_chromium
def test_a_click_from_the_summary_reaches_the_evidence_and_from_a_cell_its_finding(tmp_path):
    pytest.importorskip("websockets", reason="websockets (a vLLM dependency) drives Chromium")
    browser = Browser(write_page(tmp_path).as_uri(), tmp_path / "profile")
    try:
        # a person hid the failures in the cells table: following a link shows the cell again
        browser.click("#filters input[value='fail']")
        browser.wait_for("document.querySelector('#cell-idefics3-5-20-2-vllm-backend-model')"
                         ".style.display === 'none'")
        bad = "#bad a[href='#cell-idefics3-5-20-2-vllm-backend-model']"
        assert "idefics3 / vllm-backend / model" in browser.evaluate(
            f"document.querySelector({json.dumps(bad)}).innerText")
        browser.click(bad)
        browser.wait_for("location.hash === '#cell-idefics3-5-20-2-vllm-backend-model'")
        browser.wait_for(SETTLED, seconds=10)
        target = browser.evaluate(TARGET)
        assert target["id"] == "cell-idefics3-5-20-2-vllm-backend-model"
        assert "greedy token differs: 3 vs 4" in target["text"]
        assert target["shown"] and target["inView"], target

        # the stale finding's cell, then its finding's entry
        browser.click("#bad a[href='#cell-smolvlm-5-17-0-vllm-backend-processing']")
        browser.wait_for("location.hash === '#cell-smolvlm-5-17-0-vllm-backend-processing'")
        assert "listed as known but passed" in browser.evaluate(TARGET)["text"]
        browser.click(f"#cell-smolvlm-5-17-0-vllm-backend-processing a[href='#finding-{STALE}']")
        browser.wait_for(f"location.hash === '#finding-{STALE}'")
        browser.wait_for(SETTLED, seconds=10)
        target = browser.evaluate(TARGET)
        assert target["id"] == f"finding-{STALE}" and target["shown"] and target["inView"]
        assert "SmolVLMProcessor has no _get_num_multimodal_tokens" in target["text"]
        # the entry opened: its reason and where the whole of it is
        assert "The whole entry: docs/findings.md#" + STALE in target["text"]
    finally:
        browser.close()
