"""junit.xml: one test suite per transformers version (per vLLM and version when a run holds
several vLLMs), one test case per cell."""

from __future__ import annotations

from collections import Counter
from xml.etree import ElementTree

from conformance.results.verdict import Verdict
from conformance.results.view import View, as_view


def junit(verdicts: list[Verdict] | View) -> str:
    view = as_view(verdicts)
    suites = ElementTree.Element("testsuites", name="vllm-mm-conformance")
    for version in view.columns:
        cells = view.by_column[version]
        counts = Counter(v.status for v in cells)
        name = f"transformers-{version}".replace(" (vLLM ", "-vllm-").rstrip(")")
        suite = ElementTree.SubElement(
            suites, "testsuite", name=name, tests=str(len(cells)),
            failures=str(counts["fail"] + counts["xpass"] + counts["inconclusive"]),
            errors=str(counts["error"] + counts["crash"] + counts["timeout"]),
            skipped=str(counts["xfail"] + counts["n/a"]),
            time=f"{sum(v.seconds for v in cells):.2f}")
        for v in cells:
            # the cell's whole error text and output, where it kept them
            log = f"\n(whole output: {v.log})" if v.log else ""
            case = ElementTree.SubElement(suite, "testcase", classname=f"{v.fixture}.{v.subject}",
                                          name=f"{v.check}[{version}]", time=f"{v.seconds:.2f}")
            if v.status in ("fail", "xpass", "inconclusive"):
                ElementTree.SubElement(case, "failure",
                                       message=v.detail[:300]).text = v.detail + log
            elif v.status in ("error", "crash", "timeout"):
                ElementTree.SubElement(case, "error", message=f"{v.status}: {v.detail[:300]}",
                                       type=v.status).text = v.detail + log
            elif v.status in ("xfail", "n/a"):
                # the finding's id first: CI lists group by it without reading the reason
                finding = f" [{v.finding}]" if v.finding else ""
                ElementTree.SubElement(case, "skipped",
                                       message=f"{v.status}{finding}: {v.detail[:300]}")
    ElementTree.indent(suites)
    return ElementTree.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
