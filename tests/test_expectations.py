"""Known findings turn a matching failure into xfail, and nothing else; docs/findings.md."""

from pathlib import Path

from conformance import expectations
from conformance.expectations.document import DOCUMENT, findings_markdown
from conformance.results.judge import Failure, judge
from conformance.results.verdict import CellKey, Verdict

ROOT = Path(__file__).resolve().parent.parent


def judged(fixture: str, check: str, version: str, evidence: str | None) -> Verdict:
    """A checkpoint-level cell (exhaustive, run as vllm-backend) that observed `evidence`."""
    key = CellKey(fixture, version, "vllm-backend", check)
    return judge(key, [Failure(evidence)] if evidence else [], exhaustive=True, seconds=0.1)


def test_a_known_failure_with_its_evidence_is_xfail_with_the_reason():
    verdict = judged("gemma3", "processing", "5.17.0", "prompt ids differ at position 5")
    assert verdict.status == "xfail"
    finding = expectations.applicable("gemma3", "processing", "5.17.0")
    assert verdict.finding == finding.id and finding.reason in verdict.detail
    assert "[observed: prompt ids differ at position 5]" in verdict.detail


def test_a_different_failure_of_a_known_cell_is_not_hidden():
    verdict = judged("gemma3", "processing", "5.17.0", "image: native has 2 placeholders")
    assert verdict.status == "fail" and not verdict.finding


def test_a_known_cell_that_passes_is_xpass():
    verdict = judged("gemma3", "processing", "5.17.0", None)
    assert verdict.status == "xpass" and verdict.finding


def test_known_entries_are_bounded_by_version():
    assert "Legacy path" in expectations.applicable("gemma3", "processing", "5.12.1").reason
    assert "Offsets path" in expectations.applicable("gemma3", "processing", "5.15.1").reason
    assert expectations.applicable("llava", "processing", "5.17.0") is None


def test_a_known_error_is_xfail_only_with_its_evidence():
    from conformance.checks import get_check
    from conformance.run.cell import run_checkpoint
    from fixtures.registry import get_recipe

    recipe, check = get_recipe("qwen2_audio"), get_check("model")
    key = CellKey("qwen2_audio", "5.17.0", "vllm-backend", "model")

    def fail_with(message):
        def locate():
            raise AttributeError(message)
        return locate

    known = run_checkpoint(key, recipe, check, fail_with(
        "'Qwen2AudioModel' object has no attribute 'get_audio_features'"))
    assert known.status == "xfail" and "get_audio_features" in known.detail
    other = run_checkpoint(key, recipe, check, fail_with("something else broke"))
    assert other.status == "error" and other.detail.endswith("something else broke")


def test_the_findings_document_is_generated_from_the_findings():
    assert DOCUMENT == ROOT / "docs" / "findings.md"
    assert DOCUMENT.read_text() == findings_markdown(), \
        "regenerate docs/findings.md with `conformance known --write`"


def test_the_findings_document_shows_every_finding_in_full():
    text = findings_markdown()
    for finding in expectations.load():
        assert f'<a id="{finding.id}"></a>' in text and f"## {finding.id}\n" in text
        assert f"- transformers: {finding.describe_versions()}" in text
        for texts in finding.evidence.values():
            assert all(f"`{evidence}`" in text for evidence in texts)


def test_readme_links_the_findings_document():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Known incompatibilities", 1)[1].split("\n## ", 1)[0]
    assert "](docs/findings.md)" in section
    assert "| fixture | check |" not in readme  # the generated table lives in docs/ now


def test_a_finding_behind_a_processor_option_needs_that_option():
    crops = "raised ValueError: Gemma3Processor returned 5 row(s) of image data for 2 image(s)"
    entry = expectations.explain("gemma3", "slicing", "5.17.0", "impl", crops,
                                 ("do_pan_and_scan",))
    assert entry is not None and entry.options == ("do_pan_and_scan",)
    # the same failure on the default options is not explained by it
    assert expectations.explain("gemma3", "slicing", "5.17.0", "impl", crops) is None
    # and a check that never sets options (smoke) cannot be xpass because of it
    assert judged("gemma3", "encoder", "5.17.0", None).status == "pass"
