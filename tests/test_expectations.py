"""Known findings turn a matching failure into xfail, and nothing else (the one judge)."""


import pytest

from conformance import expectations
from conformance.expectations.document import DOCUMENT, findings_markdown
from conformance.paths import ROOT
from conformance.results.judge import Failure, judge
from conformance.results.verdict import CellKey

GEMMA3_PROCESSING = CellKey("gemma3", "5.17.0", "vllm-backend", "processing")


def test_a_known_failure_with_its_evidence_is_xfail_with_the_reason():
    verdict = judge(GEMMA3_PROCESSING, [Failure("prompt ids differ at position 5")],
                    exhaustive=True)
    assert verdict.status == "xfail" and verdict.finding == "gemma3-offsets-newlines"
    assert expectations.get("gemma3-offsets-newlines").reason in verdict.detail
    assert "[observed: prompt ids differ at position 5]" in verdict.detail


def test_a_different_failure_of_a_known_cell_is_not_hidden():
    verdict = judge(GEMMA3_PROCESSING, [Failure("image: native has 2 placeholders, backend 1")],
                    exhaustive=True)
    assert verdict.status == "fail" and not verdict.finding


def test_a_second_unknown_failure_beside_a_known_one_fails_the_cell():
    verdict = judge(GEMMA3_PROCESSING, [Failure("prompt ids differ at position 5"),
                                        Failure("image item 0: ranges differ: ...")],
                    exhaustive=True)
    assert verdict.status == "fail" and "ranges differ" in verdict.detail


def test_a_known_checkpoint_cell_that_passes_is_xpass_a_suite_cell_is_not():
    assert judge(GEMMA3_PROCESSING, [], exhaustive=True).status == "xpass"
    suite = CellKey("gemma3", "5.17.0", "impl", "prompt-ids")
    assert judge(suite, [], exhaustive=False).status == "pass"


def test_an_error_is_xfail_only_with_its_evidence_and_a_finding_that_explains_errors():
    key = CellKey("qwen2_audio", "5.17.0", "vllm-backend", "model")
    evidence = "AttributeError: 'Qwen2AudioModel' object has no attribute 'get_audio_features'"
    # the same evidence as the backend's problem is known; as an error of the cell (set-up,
    # the check raised) only a finding that says it explains errors may take it
    assert judge(key, [Failure(evidence)], exhaustive=False).status == "xfail"
    assert not expectations.get("qwen2-audio-no-get-audio-features").explains_error
    assert judge(key, [Failure(evidence, error=True)], exhaustive=False).status == "error"
    voxtral = CellKey("voxtral", "5.17.0", "vllm-backend", "model")
    known = judge(voxtral, [Failure("ValueError: [AUDIO] is present in the provided text which "
                                    "is not supported by VoxtralProcessor", error=True)],
                  exhaustive=False)
    assert known.status == "xfail" and known.finding == "voxtral-processor-unusable"
    other = judge(voxtral, [Failure("RuntimeError: something else broke", error=True)],
                  exhaustive=False)
    assert other.status == "error" and other.detail.endswith("something else broke")


def test_a_drift_is_known_only_within_the_bound_its_finding_states():
    key = CellKey("qwen3_vl", "5.17.0", "vllm-backend", "generate")

    def status(drift: str) -> str:
        evidence = (f"step 0: logprob of token 219 native -5.287027 vs backend -5.234051 (off "
                    f"by {drift}, fp32 bound 0.0001)")
        return judge(key, [Failure(evidence)], exhaustive=False).status

    assert expectations.get("qwen3-vl-deepstack-dropped").drift["generate"] == 0.07
    assert status("5.30e-02") == "xfail"
    assert status("9.00e-02") == "fail"  # a larger drift is a new failure
    assert status("nan") == "fail"
    # a finding that states no bound explains no drift beside its evidence
    llava = CellKey("gemma3", "5.17.0", "vllm-backend", "processing")
    assert judge(llava, [Failure("prompt ids differ at position 3 (max abs 0.5)")],
                 exhaustive=False).status == "fail"


def test_findings_are_bounded_by_version():
    def finding(version: str) -> str | None:
        found = expectations.applicable("gemma3", "processing", version, "vllm-backend")
        return found.id if found else None

    assert finding("5.12.1") == "gemma3-legacy-soft-token-ranges"
    assert finding("5.15.1") == "gemma3-offsets-newlines"
    assert finding("5.15.0.dev0") == "gemma3-legacy-soft-token-ranges"  # below its release
    assert expectations.applicable("llava", "processing", "5.17.0") is None


def test_a_finding_behind_a_processor_option_needs_that_option():
    crops = "raised ValueError: Gemma3Processor returned 5 row(s) of image data for 2 image(s)"
    found = expectations.explain("gemma3", "slicing", "5.17.0", "impl", crops,
                                 ("do_pan_and_scan",))
    assert found is not None and found.options == ("do_pan_and_scan",)
    # the same failure on the default options is not explained by it
    assert expectations.explain("gemma3", "slicing", "5.17.0", "impl", crops) is None
    # and a check that never sets options (checkpoint-level) cannot be xpass because of it
    key = CellKey("gemma3", "5.17.0", "vllm-backend", "encoder")
    assert judge(key, [], exhaustive=True).status == "pass"


def test_every_finding_names_known_fixtures_checks_and_subjects():
    from conformance.checks import registry
    from conformance.subjects import ORACLES, SUBJECTS
    from fixtures.registry import RECIPE_MODULES

    for finding in expectations.load():
        assert set(finding.fixtures) <= {*RECIPE_MODULES, "*"}, finding.id
        assert set(finding.checks) <= {*registry(), "*"}, finding.id
        assert set(finding.subjects) <= {*SUBJECTS, *ORACLES}, finding.id
        assert all(finding.evidence.values()), f"{finding.id}: a check without evidence"


def test_a_malformed_findings_file_is_refused(tmp_path):
    bad = tmp_path / "findings.toml"
    bad.write_text('[[finding]]\nid = "x"\ntitle = "t"\nreason = "r"\nfixtures = ["llava"]\n'
                   'versions = "~=5.1"\n[finding.evidence]\ncache = ["y"]\n')
    with pytest.raises(ValueError, match="only '>=V' and '<V'"):
        expectations.load(bad)


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


def test_the_findings_document_says_which_vllm_shows_each_finding():
    from conformance.expectations import parse
    from conformance.expectations.document import MEASURED_VLLMS, shown_on

    def finding(**extra):
        return parse({"id": "x", "title": "t", "reason": "r", "fixtures": ["llava"],
                      "evidence": {"cache": ["differ"]}, **extra})

    assert list(MEASURED_VLLMS) == ["0.31.0", "0.32.0"]
    assert [shown_on(finding(), v) for v in MEASURED_VLLMS] == ["yes", "yes"]
    assert shown_on(finding(vllm="<0.32.0"), "0.32.0") == "fixed"
    assert shown_on(finding(vllm=">=0.32.0"), "0.31.0") == "no"
    # 0.32.0's window starts at 5.16.1: a Legacy-path finding cannot show there
    assert shown_on(finding(versions="<5.15"), "0.32.0") == "n/a"
    assert shown_on(finding(versions="<5.15"), "0.31.0") == "yes"
    # inside 0.32.0's window (5.16.x) but below every version its matrix ran
    assert shown_on(finding(versions=">=5.15,<5.17"), "0.32.0") == "not measured"
    text = findings_markdown()
    assert "| finding | title | transformers | vLLM | vLLM 0.31.0 | vLLM 0.32.0 |" in text
    assert "- vLLM: all (shown by vLLM 0.31.0 yes, 0.32.0 yes)" in text
