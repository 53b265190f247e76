"""A verdict's evidence is data: the judge writes it once, nothing else parses a verdict's text.

Checked on the source, by AST: outside the judge (results/judge.py, which reads schema-1 results
back once) no module of conformance/ or benchmarks/ splits, searches or regex-matches a
verdict's `detail`, and none but the judge and the renderer (results/evidence.py) spells the
`[observed: ` marker the line is rendered with."""

from __future__ import annotations

import ast
import json
from dataclasses import fields
from pathlib import Path

import pytest

from conformance.results.evidence import Difference, Evidence
from conformance.results.judge import Failure, judge, upgrade
from conformance.results.verdict import CellKey, Verdict

ROOT = Path(__file__).resolve().parents[1]
JUDGE = {"conformance/results/judge.py"}
RENDERER = {"conformance/results/evidence.py"}
# what parsing a text looks like: its methods that cut or search it, and `re`'s functions
TEXT_METHODS = {"partition", "rpartition", "split", "rsplit", "startswith", "endswith", "find",
                "rfind", "index", "removeprefix", "removesuffix", "count", "splitlines"}
RE_FUNCTIONS = {"search", "match", "fullmatch", "findall", "finditer", "split", "sub"}
MARKER = "[observed"


def is_detail(node: ast.AST) -> bool:
    """`x.detail` or `x["detail"]`."""
    if isinstance(node, ast.Attribute):
        return node.attr == "detail"
    return (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
            and node.slice.value == "detail")


def parses_detail(source: str, name: str = "<source>", marker_allowed: bool = False
                  ) -> list[str]:
    """Where `source` parses a verdict's detail back: (line) what it does."""
    found = []
    for node in ast.walk(ast.parse(source, filename=name)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            receiver = node.func.value
            if node.func.attr in TEXT_METHODS and is_detail(receiver):
                found.append(f"{name}:{node.lineno} .{node.func.attr}() of a detail")
            if (isinstance(receiver, ast.Name) and receiver.id == "re"
                    and node.func.attr in RE_FUNCTIONS
                    and any(is_detail(a) for a in node.args)):
                found.append(f"{name}:{node.lineno} re.{node.func.attr} over a detail")
        if isinstance(node, ast.Compare) and any(isinstance(o, ast.In | ast.NotIn)
                                                 for o in node.ops):
            if any(is_detail(c) for c in node.comparators):
                found.append(f"{name}:{node.lineno} a search `in` a detail")
        if (not marker_allowed and isinstance(node, ast.Constant)
                and isinstance(node.value, str) and MARKER in node.value):
            found.append(f"{name}:{node.lineno} spells {MARKER!r}")
    return found


def sources() -> list[Path]:
    return sorted([*(ROOT / "conformance").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")])


def test_no_module_but_the_judge_parses_a_verdicts_text():
    found = []
    for path in sources():
        name = str(path.relative_to(ROOT))
        if name in JUDGE:
            continue
        found += parses_detail(path.read_text(), name, marker_allowed=name in RENDERER)
    assert not found, "read the verdict's evidence fields instead:\n" + "\n".join(found)


@pytest.mark.parametrize("planted", [
    'm = re.search(r"\\[observed: (.*?)\\]", cell["detail"])',
    '_, seen, rest = cell["detail"].partition(" [x: ")',
    'evidence = verdict.detail.split(" [", 1)[-1]',
    'hit = "vs hf:" in verdict.detail',
    'MARK = " [observed: "',
])
def test_the_check_catches_each_way_of_parsing_a_detail(planted):
    assert parses_detail(f"def f(cell, verdict):\n    {planted}\n")


def test_a_display_of_the_detail_is_no_parsing():
    assert not parses_detail('print(one_line(verdict.detail)); x = verdict.detail[:300]')


KEY = CellKey("llava", "5.17.0", "impl", "errors")
SEEN = ("0 placeholders for 1 items: a bare assertion instead of a clear error: "
        "AssertionError('the prompt holds no placeholder left for item(s) image[0]')")


def test_the_judge_writes_the_evidence_once_and_the_line_is_rendered_from_it():
    verdict = judge(KEY, [Failure(SEEN, (("size", {"a": 1}),), input="0 placeholders"),
                          Failure("vs hf: prompt ids differ at position 3")], exhaustive=True)
    assert verdict.status == "fail"  # the second difference no finding explains
    evidence = verdict.evidence
    assert evidence is not None and evidence.shown == 1
    known, new = evidence.differences
    assert known.finding == "offsets-bare-assert" and known.part and known.part in SEEN
    assert known.options == (("size", "{'a': 1}"),) and known.input == "0 placeholders"
    assert (new.finding, new.reference) == ("", "hf")
    assert verdict.detail == ("vs hf: prompt ids differ at position 3 "
                              "(+1 other distinct failure(s))")
    written = json.loads(verdict.to_json())
    assert "detail" not in written and SEEN in json.dumps(written)
    assert json.dumps(written).count(SEEN) == 1
    again = Verdict.from_json(verdict.to_json())
    assert again == verdict and again.detail == verdict.detail


def test_a_long_difference_is_kept_cut_and_the_shown_one_whole():
    long = SEEN + " and more" * 60
    verdict = judge(KEY, [Failure(long), Failure("other " * 80)], exhaustive=True)
    first, second = verdict.evidence.differences
    assert first.cut and len(first.text) == 300 and first.finding
    assert second.cut and not second.finding and verdict.evidence.shown == 1
    assert verdict.evidence.shown_text == verdict.evidence.whole == "other " * 80


def test_a_schema_1_cell_reads_back_as_the_judge_writes_it_now():
    now = judge(KEY, [Failure(SEEN, (("size", 3),))], exhaustive=True)
    old = {"fixture": "llava", "version": "5.17.0", "check": "errors", "status": "xfail",
           "subject": "impl", "vllm": "0.31.0", "seconds": 0.0, "finding": now.finding,
           "detail": now.detail, "data": {"differences": [SEEN]}}
    upgraded = Verdict.from_dict(upgrade(old))
    assert upgraded.detail == now.detail
    assert upgraded.evidence == now.evidence
    # a cell no judge saw a difference in keeps its detail
    assert upgrade({**old, "status": "n/a", "detail": "why", "data": {}})["detail"] == "why"


def test_every_field_of_the_evidence_is_documented():
    text = (ROOT / "reports" / "README.md").read_text()
    for name in [f.name for f in fields(Difference)] + [f.name for f in fields(Evidence)]:
        assert f"`{name}`" in text or f"`evidence.{name}`" in text, name
