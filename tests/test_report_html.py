"""report.html as a person navigates it: the bad cells named at the top, every symbol of its
tables a link to one element holding its cell's whole evidence, finding ids linked to their
entry, reproducers and logs linked relative to the run folder, the meta in words. The links are
followed by parsing the page (tests/test_browser.py follows them in Chromium)."""

from __future__ import annotations

import os
import re
from html.parser import HTMLParser
from pathlib import Path

from conformance.expectations.document import DOCUMENT
from conformance.paths import ROOT
from conformance.results import report
from conformance.results.html_page import cell_id, findings_document, html_report
from conformance.results.verdict import Verdict

NEWLINES = "gemma3-offsets-newlines"  # a finding in findings.toml
STALE = "smolvlm-no-token-count"  # another one, for a stale (xpass) cell
# an error whose cause comes last, after a dumped prompt (glm4v's model cell, cut everywhere)
LONG = "Failed to apply Glm4vProcessor on data=" + "<|video|>" * 1500 + \
    " Found 300 <|video|> tokens in the text but no videos were passed"


def cells() -> list[Verdict]:
    return [
        Verdict("llava", "5.17.0", "cache", "pass", subject="impl"),
        Verdict("idefics3", "5.20.2", "model", "fail", "greedy token differs: 3 vs 4",
                data={"reproducer": "repro/idefics3-model-1234abcd.py"},
                log="logs/idefics3-model.log"),
        Verdict("glm4v", "5.20.2", "model", "error", LONG),
        Verdict("gemma3", "5.17.0", "prompt-ids", "xfail", "newlines [observed: x]",
                finding=NEWLINES),
        Verdict("smolvlm", "5.17.0", "processing", "xpass", "listed as known but passed: r",
                finding=STALE),
    ]


class Page(HTMLParser):
    """The ids a page defines, its in-page links and file links, and each element's text by
    id (the text a link to it shows)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.links: list[tuple[str, str]] = []  # (href, the link's text)
        self.text: dict[str, str] = {}
        self._open: list[tuple[str, str | None]] = []  # (tag, id) of the elements open
        self._link: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        found = dict(attrs)
        if found.get("id"):
            self.ids.append(found["id"])
            self.text[found["id"]] = ""
        if tag == "a" and "href" in found:
            self._link = [found["href"], ""]
        if tag not in ("meta", "input", "br"):
            self._open.append((tag, found.get("id")))

    def handle_endtag(self, tag):
        if tag == "a" and self._link is not None:
            self.links.append((self._link[0], self._link[1]))
            self._link = None
        while self._open:
            if self._open.pop()[0] == tag:
                break

    def handle_data(self, data):
        for _, element in self._open:
            if element:
                self.text[element] += data
        if self._link is not None:
            self._link[1] += data


def broken(page: Page) -> list[str]:
    return [href for href, _ in page.links
            if href.startswith("#") and href[1:] not in page.ids]


def test_a_link_to_no_element_is_found():
    """The link check can fail: a planted link to an id the page lacks."""
    assert broken(Page("<p id='a'><a href='#a'>x</a><a href='#b'>y</a></p>")) == ["#b"]


def summary_of(text: str) -> str:
    return text.split("<section id='summary'>", 1)[1].split("</section>", 1)[0]


def test_the_bad_cells_are_named_at_the_top_each_a_link_to_its_whole_evidence():
    text = html_report(report.sort_cells(cells()), {"profile": "ci"})
    page = Page(text)
    assert not broken(page)
    summary = summary_of(text)
    assert summary.index("Bad cells (3)") < summary.index("<table class='summary'>")
    bad = re.findall(r"<li class='(\w+)'><a href='#([\w-]+)'>", summary)
    # worst first: an error before a failure before a stale finding
    assert bad == [("error", "cell-glm4v-5-20-2-vllm-backend-model"),
                   ("fail", "cell-idefics3-5-20-2-vllm-backend-model"),
                   ("xpass", "cell-smolvlm-5-17-0-vllm-backend-processing")]
    # the cell's element holds its whole evidence: the cause after 13,500 characters of prompt
    evidence = page.text["cell-glm4v-5-20-2-vllm-backend-model"]
    assert "Found 300 <|video|> tokens in the text but no videos were passed" in evidence
    assert LONG in evidence
    assert "greedy token differs: 3 vs 4" in page.text["cell-idefics3-5-20-2-vllm-backend-model"]


def test_a_run_without_bad_cells_says_so():
    text = html_report([Verdict("llava", "5.17.0", "cache", "pass", subject="impl")])
    assert "No bad cell" in summary_of(text) and "<ol id='bad'>" not in text


def test_many_bad_cells_fold_after_the_first_ones():
    many = [Verdict(f"fixture{i:02d}", "5.17.0", "cache", "error", "E") for i in range(30)]
    text = html_report(many)
    shown = summary_of(text).split("<ol id='bad'>", 1)[1].split("</ol>", 1)[0]
    assert shown.count("<li ") == 25 and "5 more" in summary_of(text)
    assert not broken(Page(text))


def test_every_symbol_of_the_tables_links_to_its_own_cell():
    verdicts = report.sort_cells(cells())
    text = html_report(verdicts)
    page = Page(text)
    assert len(page.ids) == len(set(page.ids)), "an id is used twice"
    assert {cell_id(v) for v in verdicts} <= set(page.ids)
    for table in ("class='checks' data-version='5.17.0'", "class='checks' data-version='5.20.2'",
                  "id='matrix'"):
        body = text.split(f"<table {table}>", 1)[1].split("</table>", 1)[0]
        cells_in = re.findall(r"<td class='[^']*'[^>]*>(.*?)</td>", body)
        assert cells_in and all("href='#cell-" in cell for cell in cells_in if cell), table
    # the matrix's cell links to the cell that colours it; the checks table's, to each subject's
    matrix = text.split("<table id='matrix'>", 1)[1].split("</table>", 1)[0]
    assert "data-cell='glm4v|5.20.2'><a href='#cell-glm4v-5-20-2-vllm-backend-model'>E1</a>" \
        in matrix


def test_finding_ids_link_to_their_entry(tmp_path):
    inside = ROOT / "reports" / "runs" / "latest"
    text = html_report(report.sort_cells(cells()), folder=inside)
    page = Page(text)
    assert not broken(page)
    links = dict(page.links)
    # a cell's finding links to the finding's entry in the report
    assert links[f"#finding-{NEWLINES}"] == NEWLINES
    entry = page.text[f"finding-{NEWLINES}"]
    assert "Gemma3, Offsets path: newlines" in entry and "transformers: >=5.15" in entry
    assert "stale (xpass) in 1 cell: smolvlm/vllm-backend/processing@5.17.0" in \
        page.text[f"finding-{STALE}"]
    # whose whole entry is docs/findings.md's, reached from a run folder inside the checkout
    whole = next(href for href, shown in page.links if shown == f"docs/findings.md#{NEWLINES}")
    document, anchor = whole.split("#")
    assert (inside / document).resolve() == DOCUMENT and anchor == NEWLINES
    assert f'<a id="{NEWLINES}"></a>' in DOCUMENT.read_text()
    # from a folder elsewhere no relative link reaches it: the document is named, not linked
    assert findings_document(tmp_path) is None
    elsewhere = html_report(report.sort_cells(cells()), folder=tmp_path)
    assert "findings.md'" not in elsewhere and f"docs/findings.md#{NEWLINES}</code>" in elsewhere


def test_reproducers_and_logs_are_linked_relative_to_the_run_folder(tmp_path):
    (tmp_path / "repro").mkdir()
    (tmp_path / "repro" / "idefics3-model-1234abcd.py").write_text("print('replay')\n")
    page = Page(html_report(report.sort_cells(cells()), folder=tmp_path))
    links = dict(page.links)
    assert links["repro/idefics3-model-1234abcd.py"] == "repro/idefics3-model-1234abcd.py"
    assert links["logs/idefics3-model.log"] == "logs/idefics3-model.log"
    assert "print('replay')" in page.text["cell-idefics3-5-20-2-vllm-backend-model"]
    for href, _ in page.links:
        assert not href.startswith(("/", "file:")), href
        if not href.startswith(("#", "https://")):
            assert os.path.normpath(tmp_path / href).startswith(str(tmp_path)), href
    # a cell without a log (results recorded before cells kept logs) has no link to one
    old = Verdict("idefics3", "5.20.2", "model", "fail", "x")
    assert "Log:" not in html_report([old])


def test_the_summary_words_the_meta_once():
    meta = {"environment_transformers": "5.17.0", "findings_of": "llava",
            "transformers": "5.17.0", "vllm": ["0.31.0"], "impl_reference": "vLLM 0.31.0",
            "vllm_sources": {"src": "vllm-src"}, "seed": 7, "checkpoint": "owner/name",
            "some_new_key": "value"}
    summary = summary_of(html_report([Verdict("llava", "5.17.0", "cache", "pass")], meta))
    labels = re.findall(r"<tr><th>([^<]*)</th>", summary)
    assert len(labels) == len(set(labels)), labels
    assert not [label for label in labels if "_" in label], labels
    for shown in ("transformers of the environment", "known findings of fixture",
                  "vLLM folders", "src: vllm-src", "seed of the searches", "some new key"):
        assert shown in summary, shown
    # what the cells show already (the version, the vLLM, impl's reference) is said once
    assert labels.count("transformers") == 1 and "transformers installed" not in labels
    assert summary.count("0.31.0") == 2  # the vLLM row and impl's
    assert "{'" not in summary


def test_a_report_written_into_a_folder_is_navigable_there(tmp_path):
    """write_reports: the page in the run folder, every in-page link resolving, every file
    link relative and present."""
    repro = tmp_path / "repro" / "idefics3-model-1234abcd.py"
    repro.parent.mkdir()
    repro.write_text("print('replay')\n")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "idefics3-model.log").write_text("the whole traceback\n")
    written = [Verdict(**{**v.__dict__}) for v in cells()]
    written[1].data = {"reproducer": str(repro)}  # as a run records it: absolute
    report.write_reports(tmp_path, written, {"seconds": 1.0})
    page = Page((tmp_path / "report.html").read_text())
    assert not broken(page)
    files = [href for href, _ in page.links if not href.startswith(("#", "https://"))]
    assert sorted(files) == ["logs/idefics3-model.log", "repro/idefics3-model-1234abcd.py"]
    assert all((tmp_path / href).is_file() for href in files)
    assert Path(tmp_path / "report.html").read_text().count(str(tmp_path)) == 0


def test_the_references_table_links_each_relation_to_its_backend_cell():
    model = Verdict("llava", "5.17.0", "model", "pass", data={
        "references": {"backend vs native": "agrees", "backend vs hf": "agrees"}})
    text = html_report([model, Verdict("llava", "5.17.0", "model", "pass", subject="impl")])
    table = text.split("<table id='agreement'>", 1)[1].split("</table>", 1)[0]
    assert "<a href='#cell-llava-5-17-0-vllm-backend-model'>agree</a>" in table
    assert not broken(Page(text))
