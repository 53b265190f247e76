"""Known findings turn a matching failure into xfail, and nothing else (the one judge); each
finding's evidence names its cause, and both its axes are bounded or say why not."""

import ast
import builtins
import functools
import importlib.util
import json
import re
from pathlib import Path

import pytest

from conformance import expectations
from conformance.expectations.document import DOCUMENT, _code, findings_markdown
from conformance.paths import ROOT
from conformance.results.judge import Failure, judge
from conformance.results.verdict import CellKey

GEMMA3_PROCESSING = CellKey("gemma3", "5.17.0", "vllm-backend", "processing")
# the Offsets path's newlines, as the processing check words them on the tiny Gemma3 fixture
NEWLINES = ("prompt ids differ at position 5: native [332, 7, 329, 329, 329, 329] vs backend "
            "[330, 331, 7, 329, 329, 329] (lengths 42 vs 44)")


def test_a_known_failure_with_its_evidence_is_xfail_with_the_reason():
    verdict = judge(GEMMA3_PROCESSING, [Failure(NEWLINES)], exhaustive=True)
    assert verdict.status == "xfail" and verdict.finding == "gemma3-offsets-newlines"
    assert expectations.get("gemma3-offsets-newlines").reason in verdict.detail
    assert f"[observed: {NEWLINES}]" in verdict.detail


def test_the_backends_own_version_gate_is_n_a_beside_it_a_failure_is_judged():
    """vLLM 0.34.0's backend refuses Aria below transformers 5.18.0 (`check_version`): the
    release says it does not serve it there, as its window does; any other failure beside the
    gate is judged as ever."""
    key = CellKey("aria", "5.17.0", "vllm-backend", "model", vllm="0.34.0")
    gate = ("backend: ImportError: Transformers modeling backend requires transformers>=5.18.0 "
            "for Aria, but got 5.17.0")
    verdict = judge(key, [Failure(gate), Failure("text only: " + gate)], exhaustive=True)
    assert verdict.status == "n/a", verdict.detail
    assert verdict.detail.startswith("the backend serves Aria from transformers 5.18.0 on, not "
                                     "on 5.17.0")
    other = judge(key, [Failure(gate), Failure("greedy token differs: native 3 vs backend 4")],
                  exhaustive=True)
    assert other.status == "fail"


def test_the_same_kind_of_difference_without_the_cause_is_not_known():
    # the harness's words alone ("prompt ids differ") are no evidence: other ids differing in
    # the same cell (a BOS doubled) are a new failure
    bos = ("prompt ids differ at position 1: native [332, 7, 329, 329, 329, 329] vs backend "
           "[2, 332, 7, 329, 329, 329] (lengths 42 vs 43)")
    assert judge(GEMMA3_PROCESSING, [Failure(bos)], exhaustive=True).status == "fail"


def test_a_different_failure_of_a_known_cell_is_not_hidden():
    verdict = judge(GEMMA3_PROCESSING, [Failure("image: native has 2 placeholders, backend 1")],
                    exhaustive=True)
    assert verdict.status == "fail" and not verdict.finding


def test_a_second_unknown_failure_beside_a_known_one_fails_the_cell():
    verdict = judge(GEMMA3_PROCESSING, [Failure(NEWLINES),
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
    assert judge(GEMMA3_PROCESSING, [Failure(f"{NEWLINES} (max abs 0.5)")],
                 exhaustive=False).status == "fail"


def test_a_drift_bound_may_name_a_variant_and_holds_for_it_alone():
    from conformance.expectations import parse

    found = parse({"id": "d", "title": "t", "reason": "r", "fixtures": ["gemma3", "gemma3~x"],
                   "evidence": {"model": ["token 1"]},
                   "drift": {"model": 0.04, "model@gemma3~x": 0.1}})
    observed = "logprob of token 1 native 0 vs backend 0 (off by 9.0e-02, fp32 bound 1e-05)"
    assert found.shown_by("model", observed, "gemma3~x")
    assert not found.shown_by("model", observed, "gemma3")
    assert not found.shown_by("model", observed.replace("9.0e-02", "0.2"), "gemma3~x")
    with pytest.raises(ValueError, match="drift 'model@llava' names a fixture"):
        parse({"id": "d", "title": "t", "reason": "r", "fixtures": ["gemma3"],
               "evidence": {}, "drift": {"model@llava": 0.1}})


def test_findings_are_bounded_by_version():
    def finding(version: str) -> str | None:
        found = expectations.applicable("gemma3", "processing", version, "vllm-backend")
        return found.id if found else None

    assert finding("5.12.1") == "gemma3-legacy-soft-token-ranges"
    assert finding("5.15.1") == "gemma3-offsets-newlines"
    assert finding("5.15.0.dev0") == "gemma3-legacy-soft-token-ranges"  # below its release
    assert expectations.applicable("llava", "processing", "5.17.0") is None


def test_a_finding_behind_a_processor_option_needs_that_option():
    crops = ("raised ValueError: Gemma3Processor returned 5 row(s) of image data for 1 image(s), "
             "which cannot be split into the [1] row(s) per image derived from its outputs")
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
    from fixtures.variants import known_names

    for finding in expectations.load():  # a fixture, or a config variant (fixture~variant)
        assert set(finding.fixtures) <= {*known_names(), "*"}, finding.id
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
            assert all(_code(evidence) in text for evidence in texts)


def test_readme_links_the_findings_document():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Known incompatibilities", 1)[1].split("\n## ", 1)[0]
    assert "](docs/findings.md)" in section
    assert "| fixture | check |" not in readme  # the generated table lives in docs/ now


def test_the_findings_document_says_which_vllm_shows_each_finding(monkeypatch):
    from conformance.checks import registry
    from conformance.core import baseline
    from conformance.expectations import parse
    from conformance.expectations.document import measured_vllms, shown_on

    def finding(**extra):
        return parse({"id": "x", "title": "t", "reason": "r", "fixtures": ["llava"],
                      "evidence": {"cache": ["differ"]}, **extra})

    # what the baseline measured, derived from its cells: no hand list of releases
    cells = ({"check": "model", "vllm": "0.31.0", "version": "5.17.0", "status": "pass"},
             {"check": "cache", "vllm": "0.31.0", "version": "5.14.1", "status": "pass"},
             {"check": "model", "vllm": "0.34.0", "version": "5.22.2", "status": "n/a"},
             {"check": "cache", "vllm": "0.34.0", "version": "5.22.2", "status": "pass"},
             {"check": "cache", "vllm": "0.33.0", "version": "5.20.2", "status": "pass"},
             {"check": "model", "vllm": "0.33.0", "version": "5.20.2", "status": "pass"},
             {"check": "model", "vllm": "0.32.0", "version": "5.17.0", "status": "pass"})
    monkeypatch.setattr(baseline, "cells", lambda path=baseline.BASELINE: cells)
    assert measured_vllms() == {"0.31.0": ("5.14.1", "5.17.0"), "0.32.0": ("5.17.0",),
                                "0.33.0": ("5.20.2",), "0.34.0": ("5.22.2",)}
    assert baseline.engines_not_run() == {"0.34.0"}
    assert baseline.newest_engine_release() == "0.33.0"
    assert [shown_on(finding(), v) for v in measured_vllms()] == ["yes"] * 4
    # a release whose engine never ran (every model cell n/a in the baseline): a finding of
    # model-loading checks alone is not measured on it
    model_only = parse({"id": "m", "title": "t", "reason": "r", "fixtures": ["llava"],
                        "evidence": {"model": ["differ"]}})
    assert [shown_on(model_only, v) for v in measured_vllms()] == ["yes"] * 3 + ["not measured"]
    assert set(baseline.ENGINE_CHECKS) == {c.id for c in registry().values() if c.loads_model}
    assert shown_on(finding(vllm="<0.32.0"), "0.32.0") == "fixed"
    assert shown_on(finding(vllm=">=0.32.0"), "0.31.0") == "no"
    # 0.32.0's window starts at 5.16.1: a Legacy-path finding cannot show there
    assert shown_on(finding(versions="<5.15"), "0.32.0") == "n/a"
    assert shown_on(finding(versions="<5.15"), "0.31.0") == "yes"
    # inside 0.32.0's window (5.16.x) but below every version its matrix ran
    assert shown_on(finding(versions=">=5.15,<5.17"), "0.32.0") == "not measured"
    text = findings_markdown()
    assert ("| finding | title | transformers | vLLM | vLLM 0.31.0 | vLLM 0.32.0 | vLLM 0.33.0 | "
            "vLLM 0.34.0 |" in text)
    assert "- vLLM: all (shown by vLLM 0.31.0 yes, 0.32.0 yes, 0.33.0 yes, 0.34.0 " in text


# --- the evidence names its cause -----------------------------------------------------------
#
# An evidence string explains a failure by being a substring of it, so one made of the
# harness's own wording ("ranges differ", "prompt ids differ at position") matches any failure of
# that kind in the finding's cells, whatever caused it, and would hide a new bug there. Each
# evidence string must hold something of the cause: a token or id, a field, a value, or a message
# of the subject or processor that names what failed. The rule: take away every phrase the
# harness writes (derived from its sources below), the subjects' and oracles' names, the
# messages vLLM raises for any failure of a kind (GENERIC_MESSAGES), and filler; something
# specific must be left.

# Where the harness words what it observed: the checks, the runners around them ("raised ",
# "setup: ") and the subjects' wrappers of native vLLM and the HF processor (the oracles' own
# refusals). Planted faults stand for subject bugs: their strings are a subject's, not templates.
TEMPLATE_SOURCES = ("conformance/checks", "conformance/run", "conformance/subjects")
NOT_TEMPLATES = frozenset(f"conformance/subjects/faults/{name}.py" for name in (
    "__init__", "impl_steps", "backend_processing", "backend_model"))

# Messages a subject raises for any failure of one kind, whatever caused it, so they name no
# cause: (package, file, a phrase of the message, why). Its constant parts, as the source writes
# them (an f-string's text between its fields), are taken away like the harness's phrases;
# evidence may keep one only beside what names the cause (the item, a count, the message it
# wraps). impl's are its forms of vLLM's, which it reproduces.
GENERIC_MESSAGES = (
    ("vllm", "transformers_utils/processor.py", "Failed to load the processor",
     "raised from any ValueError while loading any processor: the cause is the error it wraps"),
    ("vllm", "multimodal/processing/context.py", "Failed to apply ",
     "wraps any exception of any HF processor call (the cause follows as 'caused by')"),
    ("vllm", "multimodal/processing/processor.py", "Failed to apply prompt replacement for ",
     "asserted for any item whose prompt update matched nothing, whatever the prompt lacked"),
    ("vllm", "multimodal/processing/processor.py", "prompt placeholders",
     "raised for any count of placeholders unlike the items' (the counts are the values)"),
    ("vllm", "model_executor/models/utils.py", "Attempted to assign ",
     "raised for any count of embeddings unlike the placeholders' (the counts are the values)"),
    ("vllm", "model_executor/models/transformers/multimodal.py", " row(s) of image data for ",
     "the backend's check of any rows count its processor's outputs cannot split per image"),
    ("vllm", "model_executor/models/transformers/multimodal.py", "The expanded prompt holds ",
     "the backend's Legacy check of any image token count its processor does not account for"),
    ("impl", "replace.py", "the prompt holds no placeholder left for item(s) ",
     "impl's form of vLLM's prompt-replacement assertion"),
    ("impl", "hf.py", " failed on inputs ",
     "impl's form of vLLM's wrapper of the HF processor call"),
    ("impl", "fields.py", " row(s) of image data for ", "impl's form of the backend's rows check"),
    ("impl", "legacy.py", "the expanded prompt marks ",
     "impl's form of the backend's Legacy token count check"),
)

# Words that name nothing of a cause wherever they are left: the exception types code raises to
# report a failure of any kind (an AssertionError is kept: an `assert` that fired is a cause of
# its own, offsets-bare-assert), the modalities, the field every processor of a modality returns,
# the processor's class (the fixture's, which the finding already names), and filler words.
REPORTING_ERRORS = frozenset(
    name for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, Exception) and name.endswith("Error")
    and name != "AssertionError")
MODALITIES = frozenset({"image", "audio", "video"})
MAIN_FIELDS = frozenset({"pixel_values", "input_features", "pixel_values_videos"})
PROCESSOR_CLASS = re.compile(r"[A-Z]\w*Processor")
FILLER = frozenset({"a", "an", "the", "of", "to", "in", "on", "for", "and", "or", "but", "not",
                    "no", "by", "with", "from", "as", "at", "is", "it", "its", "be", "vs", "than"})

# Evidence that still names no cause, each with why it stays until it can be reworded (a test
# below fails once an entry is no longer needed).
WITHOUT_CAUSE = {
    ("smolvlm-no-token-count", "items located, the processor expanded"):
        "embed-count words it as two counts ('1 image items located, the processor expanded "
        "17'), the HF oracle's one per run of marked tokens, which varies with the image (13, "
        "17 on the fixed seed's cases): no part of it stays with the cause",
    ("legacy-bypasses-processor-cache", "did not hit the processor cache"):
        "the cache check's whole message is 'a second identical request did not hit the "
        "processor cache': it names no value (the hits it counted, the processor class) to "
        "quote instead",
    **{("video-embed-token-tie", f"video item {index}: embedding positions differ"):
       "vLLM 0.32.0's cells are not in the committed baseline: no observed difference to take "
       "the positions or ids from" for index in range(3)},
    **{("video-embed-token-tie",
        f"prompt: vs vllm-native: video item {index}: embedding positions differ"):
       "vLLM 0.32.0's cells are not in the committed baseline: no observed difference to take "
       "the positions or ids from" for index in range(3)},
}

# a token of the prompt (<image>, [IMG_BREAK]), an empty list (a side with nothing more: a
# value), a word, or one punctuation mark
TOKEN = re.compile(r"<[^<>\s]+>|\[[A-Z][A-Z_]*\]|\[\]|\w+|[^\w\s]")


def _tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


def _is_word(token: str) -> bool:
    return bool(re.match(r"\w", token))


def _literal_parts(node: ast.AST) -> list[str]:
    """A string expression's constant text: an f-string's parts between its fields."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant)]
    return []


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            if node.body and isinstance(node.body[0], ast.Expr):
                found.add(id(node.body[0].value))
    return found


def harness_phrases() -> set[str]:
    """Every phrase the harness writes into what it reports: each f-string's constant parts and
    every other string literal holding a space ("raised ", "setup: "; one without is a key or a
    name, not wording), leaving out docstrings and the checks' declarations
    (`Check(statement=..., hint=...)`: prose for people, never part of a difference)."""
    phrases: set[str] = set()
    for folder in TEMPLATE_SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if str(path.relative_to(ROOT)) in NOT_TEMPLATES:
                continue
            tree = ast.parse(path.read_text())
            skip = _docstrings(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Check":
                    skip |= {id(n) for kw in node.keywords for n in ast.walk(kw.value)}
            for node in ast.walk(tree):
                if id(node) in skip:
                    continue
                if isinstance(node, ast.JoinedStr):
                    skip |= {id(v) for v in node.values}
                    phrases.update(_literal_parts(node))
                elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                        and re.search(r"\s", node.value):
                    phrases.add(node.value)
    return {p for p in phrases if re.search(r"[A-Za-z]", p)}


def _source(package: str, file: str) -> Path:
    spec = importlib.util.find_spec(package)
    assert spec and spec.submodule_search_locations, f"{package} is not installed"
    return Path(next(iter(spec.submodule_search_locations))) / file


def generic_phrases() -> dict[tuple[str, str, str], list[str]]:
    """Each GENERIC_MESSAGES entry's constant parts, read from the literal in its source that
    holds the phrase."""
    found = {}
    for package, file, phrase, _ in GENERIC_MESSAGES:
        tree = ast.parse(_source(package, file).read_text())
        literals = [parts for node in ast.walk(tree)
                    if (parts := _literal_parts(node)) and phrase in "".join(parts)]
        assert literals, f"{package}/{file} holds no message with {phrase!r}"
        found[(package, file, phrase)] = literals[0]
    return found


@functools.cache
def _phrase_tokens() -> tuple[tuple[str, ...], ...]:
    phrases = harness_phrases() | {p for parts in generic_phrases().values() for p in parts}
    return tuple(t for p in phrases if (t := tuple(_tokens(p))))


def _covered(tokens: list[str], phrases: tuple[tuple[str, ...], ...]) -> list[bool]:
    """Which of the evidence's tokens a harness or generic phrase accounts for: a run of them
    that is a run of a phrase's tokens, of at least two words (one shared word is chance) or
    the phrase's every word (a one-word phrase: " vs ", ": shape ")."""
    covered = [False] * len(tokens)
    for phrase in phrases:
        words = sum(map(_is_word, phrase))
        for start in range(len(tokens)):
            for at in (k for k, token in enumerate(phrase) if token == tokens[start]):
                end = start
                while end < len(tokens) and at + end - start < len(phrase) \
                        and phrase[at + end - start] == tokens[end]:
                    end += 1
                run = sum(map(_is_word, tokens[start:end]))
                if run >= 2 or run == words >= 1:
                    covered[start:end] = [True] * (end - start)
    return covered


def specific_part(evidence: str) -> list[str]:
    """What of `evidence` names its cause: its tokens that no harness or generic phrase covers,
    less the subjects' names, punctuation and the words of no cause."""
    from conformance.subjects import ORACLES, SUBJECTS

    names = {*SUBJECTS, *ORACLES}
    names |= {name.split("-", 1)[1] for name in names if "-" in name}  # "native", "backend"
    tokens = _tokens(" ".join(part for part in re.split(r"(\S+)", evidence)
                              if part.strip() not in names))
    covered = _covered(tokens, _phrase_tokens())
    # which item of the prompt ("image item 1") says where, not why: no value of a cause
    left = [t for i, (t, c) in enumerate(zip(tokens, covered, strict=True))
            if not c and not (t.isdigit() and i and tokens[i - 1] == "item")]
    return [t for t in left
            if (_is_word(t) or len(t) > 1)  # a lone punctuation mark is filler
            and t.lower() not in FILLER and t not in REPORTING_ERRORS
            and t not in MODALITIES and t not in MAIN_FIELDS and t not in names
            and not PROCESSOR_CLASS.fullmatch(t)]


def test_every_evidence_names_its_cause():
    vague = [f"{finding.id} / {check}: {evidence!r}"
             for finding in expectations.load()
             for check, texts in finding.evidence.items() for evidence in texts
             if not specific_part(evidence) and (finding.id, evidence) not in WITHOUT_CAUSE]
    assert not vague, ("evidence of the harness's wording alone; quote what the failure says "
                       "of its cause (a token, field, value or the subject's message):\n"
                       + "\n".join(vague))


@pytest.mark.parametrize("evidence", [
    "ranges differ", "prompt ids differ", "vs vllm-native: prompt ids differ",
    "embedding positions differ", "did not hit the processor cache", "logprob of token",
    "a bare assertion instead of a clear error", ".pixel_values: shape", "shape (",
    "items located, the processor expanded", "Failed to load the processor",
    "Failed to apply prompt replacement", "no placeholder left for item",
    "row(s) of image data for", "image token(s) but PixtralProcessor accounts for",
    "audio items, but instead found", "multimodal tokens to",
    "video item 1: embedding positions differ",  # an item's index says where, not why
])
def test_the_harness_wording_and_generic_messages_name_no_cause(evidence):
    assert not specific_part(evidence)


@pytest.mark.parametrize("evidence, specific", [
    ("length=5 embeds=4 of 5", "4"),
    ("[1478] (lengths", "1478"),
    (".labels: shape", "labels"),
    ("Found total 0 <image_soft_token> tokens", "<image_soft_token>"),
    ("only vllm-native [], only", "[]"),
    ("Unable to get max input length", "Unable"),
    ("Failed to apply prompt replacement for mm_items['image'][0]", "0"),
    ("raised ValueError from StopIteration(), but the error names neither", "StopIteration"),
    ("embeds=all", "all"),
])
def test_a_token_field_value_or_the_subjects_message_is_specific(evidence, specific):
    assert specific in specific_part(evidence)


def test_the_harness_phrases_are_derived_from_its_sources():
    phrases = harness_phrases()
    # differences.py's vocabulary, the checks' own and the runners'
    for expected in ("prompt ids differ at position ", ": ranges differ: ",
                     ": embedding positions differ: ", ": values differ (max abs ",
                     "a second identical request did not hit the processor cache",
                     ": logprob of token ", "raised "):
        assert expected in phrases, expected
    # never a check's prose for people, nor a planted fault's
    assert not any(p.startswith("Per item, placeholder offset") for p in phrases)
    assert len(phrases) > 150  # the checks' whole vocabulary, not a hand-made list


def test_each_generic_message_is_the_subjects_own():
    """Every GENERIC_MESSAGES entry is still raised, as written, where it says (vLLM 0.31.0,
    impl): a message that moved or changed is found again before the rule relies on it."""
    parts = generic_phrases()
    assert all(any(p.strip() for p in found) for found in parts.values())
    assert all(why for *_, why in GENERIC_MESSAGES)


def test_each_evidence_left_without_its_cause_still_is():
    evidences = {(f.id, e) for f in expectations.load() for texts in f.evidence.values()
                 for e in texts}
    for key, why in WITHOUT_CAUSE.items():
        assert key in evidences, f"{key}: no longer evidence of that finding: drop it"
        assert not specific_part(key[1]), f"{key}: names its cause now: drop it"
        assert why


# --- both axes bounded, or why not ----------------------------------------------------------

def test_every_finding_bounds_both_axes_or_says_why_not():
    from conformance.expectations import OPEN_AXES
    from impl.version import bounds

    unsaid = [f"{finding.id}: {axis}" for finding in expectations.load() for axis in OPEN_AXES
              if not bounds(getattr(finding, axis))[1] and not finding.open.get(axis)]
    assert not unsaid, ("no upper bound and no `[finding.open]` reason: "
                        + ", ".join(unsaid))


@pytest.mark.parametrize("open_, message", [
    ({"transformers": "why"}, "takes versions and vllm only"),
    ({"vllm": " "}, "open.vllm must say why"),
    ({"versions": "why"}, "open.versions beside an upper bound"),
])
def test_an_open_reason_is_checked(open_, message):
    from conformance.expectations import parse

    raw = {"id": "x", "title": "t", "reason": "r", "fixtures": ["llava"], "versions": "<5.25",
           "evidence": {"cache": ["[1478]"]}, "open": open_}
    with pytest.raises(ValueError, match=re.escape(message)):
        parse(raw)


def test_the_findings_document_says_why_an_axis_is_open():
    from conformance.expectations.document import inline_markdown

    text = " ".join(findings_markdown().split())  # wrapped lines read as one
    for finding in expectations.load():
        for why in finding.open.values():
            assert f"no upper bound: {inline_markdown(why)}" in text, finding.id


# --- where a finding is filed upstream and what confirms it ------------------------------------

# Scripts of reports/confirm/ that confirm no finding, each with why
PROBES = {"reports/confirm/video_probe.py": "a probe of 0.32.0's video support: it found "
          "video-embed-token-tie, which video_embed_token_tie.py confirms",
          "reports/confirm/aya_vision_token_counts.py": "transformers 5.25.0's Aya Vision token "
          "counts: 5.25.0 is not in the default matrix yet"}


def _finding(**extra) -> expectations.Finding:
    return expectations.parse({"id": "x", "title": "t", "reason": "r", "fixtures": ["llava"],
                               "evidence": {"cache": ["[1478]"]}, **extra})


def test_upstream_and_confirmed_by_load():
    assert expectations.get("backend-no-item-limit").confirmed_by == (
        "reports/confirm/item_limits.py",)
    assert expectations.get("audioflamingo3-budget-below-long-audio").confirmed_by == (
        "reports/confirm/profiling_budgets.py", "reports/confirm/dummy_data.py",
        "reports/confirm/glmasr_backend.py")
    assert expectations.get("voxtral-backend-processor-not-loaded").upstream == (
        "https://github.com/vllm-project/vllm/pull/49958",)
    # none recorded: both empty, never a guess
    none = expectations.get("offsets-bare-assert")
    assert none.upstream == () and none.confirmed_by == ()
    issue = "https://github.com/huggingface/transformers/issues/41749"
    assert _finding(upstream=[issue]).upstream == (issue,)


@pytest.mark.parametrize("extra, message", [
    ({"upstream": "https://github.com/vllm-project/vllm/pull/1"}, "`upstream` takes a list"),
    ({"upstream": ["https://github.com/sgl-project/sglang/issues/1"]}, "upstream 'https://github"),
    ({"upstream": ["http://github.com/vllm-project/vllm/pull/1"]}, "is no https://github.com/"),
    ({"upstream": ["https://github.com/vllm-project/vllm/pull/0"]}, "is no https://github.com/"),
    ({"upstream": ["https://github.com/vllm-project/vllm/pull/1#issuecomment-2"]}, "is no "),
    ({"upstream": ["https://github.com/vllm-project/vllm/discussions/1"]}, "is no "),
    ({"confirmed_by": ["reports/confirm/missing.py"]}, "is no script of reports/confirm/"),
    ({"confirmed_by": ["reports/confirm/dummy_data.txt"]}, "is no script of reports/confirm/"),
    ({"confirmed_by": ["reports/repro/llava-impl-errors-00000000.py"]}, "is no script of "),
    ({"confirmed_by": ["reports/confirm/../confirm/item_limits.py"]}, "is no script of "),
    ({"confirmed_by": [str(ROOT / "reports/confirm/item_limits.py")]}, "is no script of "),
    ({"confirmed_by": ["reports/confirm/item_limits.py"] * 2}, "list of distinct strings"),
    ({"confirmed_by": [1]}, "`confirmed_by` takes a list"),
    ({"confirmed": ["reports/confirm/item_limits.py"]}, "unknown keys ['confirmed']"),
])
def test_a_bad_upstream_or_confirmed_by_is_refused_in_one_line(extra, message):
    with pytest.raises(ValueError, match=re.escape(message)) as refused:
        _finding(**extra)
    assert str(refused.value).startswith("finding 'x': ") and "\n" not in str(refused.value)


def test_every_confirming_script_exists_and_confirms_a_finding():
    from conformance.expectations import coverage

    named = {script for f in expectations.load() for script in f.confirmed_by}
    # a real attempt at an architecture the backend cannot serve confirms its coverage entry
    named |= {entry.confirmed_by for entry in coverage.load().unservable.values()}
    assert all((ROOT / script).is_file() for script in named)
    scripts = {str(path.relative_to(ROOT)) for path in (ROOT / "reports/confirm").glob("*.py")}
    assert scripts - named == set(PROBES), "a script of reports/confirm/ that nothing names"
    assert not set(PROBES) & named


def test_a_script_a_reason_names_is_one_that_confirms_the_finding():
    for finding in expectations.load():
        mentioned = set(re.findall(r"reports/confirm/\w+\.py", finding.reason))
        assert mentioned <= set(finding.confirmed_by), finding.id


def test_the_findings_document_shows_upstream_and_confirmed_by():
    text = findings_markdown()
    for finding in expectations.load():
        section = text.split(f"## {finding.id}\n", 1)[1].split("\n## ", 1)[0]
        assert all(f"]({link})" in section for link in finding.upstream), finding.id
        assert all(f"[`{script}`](../{script})" in section
                   for script in finding.confirmed_by), finding.id
    assert "- upstream: [vllm-project/vllm#49958](https://github.com/vllm-project/vllm/pull/49958)"\
        in text
    assert "- upstream: none known" in text
    assert "- confirmed by: no standalone script: the harness's cells below" in text


# --- rewording leaves the baseline's known cells known ------------------------------------------

def test_every_known_cell_of_the_baseline_is_known_by_the_same_finding_rejudged():
    """Re-judged from what it stored, every xfail cell of reports/baseline.json is still xfail,
    by the finding it records (a split one: the baseline records the finding split off)."""
    from conformance.results.rejudge import rejudge

    cells = json.loads((ROOT / "reports" / "baseline.json").read_text())["cells"]
    moved = [f"{r.label}: {r.cell['finding']} -> {r.finding or 'none'}"
             + (f" ({r.unexplained[0][:120]})" if r.unexplained else "")
             for r in rejudge(cells) if not r.still_known or r.finding != r.cell["finding"]]
    assert not moved, "\n".join(moved)


def test_evidence_for_one_fixture_claims_no_cell_of_another():
    """`dummy-data@cohere2_vision` on a finding that also lists aya_vision: aya_vision's
    dummy-data cells are not known by it (a pass there is a pass, not an xpass)."""
    finding = expectations.get("legacy-structure-tokens-embedded")
    assert "dummy-data@cohere2_vision" in finding.evidence and "dummy-data" not in finding.evidence
    assert finding.applies("cohere2_vision", "dummy-data", "5.12.1")
    assert not finding.applies("aya_vision", "dummy-data", "5.12.1")
    assert finding.applies("aya_vision", "processing", "5.12.1")


def test_evidence_for_any_check_of_one_fixture_is_looked_up_for_that_fixture():
    """`*@fixture`: every check of that fixture claimed, and its evidence shows there alone (a
    key the loader accepted once claimed the cells but was never looked up)."""
    finding = expectations.Finding(
        "f", "t", "r", fixtures=("qwen2_vl", "qwen2_5_vl"),
        evidence={"*@qwen2_vl": ("the cause: token 7",), "model": ("other cause",)})
    assert finding.applies("qwen2_vl", "generate", "5.17.0")
    assert finding.part_shown("generate", "x: the cause: token 7", "qwen2_vl") == \
        "the cause: token 7"
    assert finding.part_shown("generate", "x: the cause: token 7", "qwen2_5_vl") is None
    assert not finding.applies("qwen2_5_vl", "generate", "5.17.0")


def test_an_option_bound_to_one_fixture_binds_that_fixture_alone():
    # a finding of several fixtures, each showing it under its own option
    finding = expectations.Finding(
        id="per-fixture-options", title="t", reason="r", fixtures=("aya_vision", "idefics3"),
        evidence={"profiling": ("x",)},
        options=("crop_to_patches@aya_vision", "do_image_splitting@idefics3"))
    assert finding.applies("aya_vision", "profiling", "5.17.0", options=("crop_to_patches",))
    assert not finding.applies("aya_vision", "profiling", "5.17.0",
                               options=("do_image_splitting",))
    assert finding.applies("idefics3", "profiling", "5.17.0", options=("do_image_splitting",))
    assert not finding.applies("idefics3", "profiling", "5.17.0")  # never on the defaults
    assert finding.option_names == ("crop_to_patches", "do_image_splitting")
