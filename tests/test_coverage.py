"""`conformance coverage`: the candidates transformers ships and vLLM's route for each."""

import pytest

from conformance.cli.coverage import TABLE_DOC, fixtures_by_architecture, table, table_doc
from conformance.expectations import coverage as catalogue
from conformance.inputs.coverage import BACKEND_ONLY, FALLBACK, NATIVE
from fixtures.registry import get_recipe


def candidate(model_type, architecture, vllm=NATIVE, moe=False):
    return {"model_type": model_type, "architecture": architecture, "base_class": None,
            "processor": None, "vllm": vllm, "encoder_decoder": False,
            "attention_interface": True, "token_counts": True, "moe": moe}


def test_the_table_marks_each_model_type_per_version_with_its_fixture():
    probes = [
        {"transformers": "5.12.1", "candidates": [candidate("llava", "LlavaForX")]},
        {"transformers": "5.17.0", "candidates": [
            candidate("llava", "LlavaForX"), candidate("emu3", "Emu3ForX", BACKEND_ONLY),
            candidate("kimi", "KimiForX", FALLBACK, moe=True)]},
    ]
    known = catalogue.Catalogue(frozenset({"kimi"}), {"emu3": catalogue.Unservable(
        "emu3", "its VQ tokens are no placeholder", "ValueError: no placeholder", "x.py")})
    lines = table(probes, {"LlavaForX": ["llava", "pixtral"]}, known)
    assert lines[0] == "| model type | class | vLLM | MoE | fixture | 5.12.1 | 5.17.0 |"
    assert ("| emu3 | Emu3ForX | backend-only |  | unservable: its VQ tokens are no "
            "placeholder | – | ✓ |") in lines
    assert "| kimi | KimiForX | fallback | yes | planned | – | ✓ |" in lines
    assert "| llava | LlavaForX | native |  | llava, pixtral | ✓ | ✓ |" in lines
    assert lines[-1] == ("3 model types; 1 with a fixture, 1 planned, 1 unservable; 1 served "
                         "only through the backend, 1 unknown to vLLM's registry (the backend "
                         "is its fallback); 1 with experts")
    assert "| other | OtherForX | native |  | – (not in coverage.toml) | ✓ |" in table(
        [{"transformers": "5.17.0", "candidates": [candidate("other", "OtherForX")]}], {})


# --- the catalogue: every candidate of every default version has a fixture or a word ----------


def test_the_recorded_probes_are_the_full_matrix_versions():
    from conformance.run.versions import FULL_VERSIONS

    # a version joining the matrix brings its architectures: `coverage --write`
    assert [p["transformers"] for p in catalogue.read_snapshot()] == list(FULL_VERSIONS)


def test_every_candidate_has_a_fixture_or_an_entry_and_no_entry_is_stale():
    gaps = catalogue.uncovered(catalogue.read_snapshot(), fixtures_by_architecture(),
                               catalogue.load())
    assert not gaps["missing"], ("candidates with neither a fixture nor an entry in "
                                 f"coverage.toml: {gaps['missing']}")
    assert not gaps["stale"], f"entries coverage.toml should drop: {gaps['stale']}"


def test_no_candidate_of_the_default_versions_is_left_planned():
    """Every candidate was tried for real: a fixture, or an `unservable` reason measured by an
    attempt. `planned` (tried by nobody) is not an answer a contributor can act on."""
    planned = sorted(catalogue.load().planned)
    assert not planned, (f"planned in coverage.toml, never tried: {planned}; give each a fixture "
                         "(fixtures/recipes/) or an [[unservable]] entry from a real attempt")


def test_a_new_candidate_or_a_stale_entry_is_named():
    probes = [{"transformers": "5.17.0", "candidates": [
        candidate("llava", "LlavaForX"), candidate("newcomer", "NewForX")]}]
    known = catalogue.Catalogue(frozenset({"llava", "gone"}), {})
    gaps = catalogue.uncovered(probes, {"LlavaForX": ["llava"]}, known)
    assert gaps == {"missing": ["newcomer (5.17.0)"],
                    "stale": ["llava (has a fixture)", "gone (in no probed version)"]}
    # one candidate release probed alone: what it lacks may be in the default versions
    assert catalogue.uncovered(probes, {"LlavaForX": ["llava"]}, known,
                               every_version=False)["stale"] == ["llava (has a fixture)"]


def test_a_model_type_sharing_a_fixtures_class_under_its_own_config_is_not_covered():
    # pp_chart2table: GotOcr2ForConditionalGeneration under a config AutoModel does not map
    probes = [{"transformers": "5.25.0", "candidates": [
        candidate("got_ocr2", "GotForX"), candidate("pp", "GotForX"),
        candidate("other", "OtherForX")]}]
    entry = catalogue.Unservable("pp", "r", "E", "README.md", shares_class_with="got_ocr2")
    wrong = catalogue.Unservable("other", "r", "E", "README.md", shares_class_with="got_ocr2")
    known = catalogue.Catalogue(frozenset(), {"pp": entry, "other": wrong})
    fixtures = {"GotForX": ["got_ocr2"]}
    assert known.covers("got_ocr2", "GotForX", fixtures) == ["got_ocr2"]
    assert known.covers("pp", "GotForX", fixtures) == []
    assert catalogue.uncovered(probes, fixtures, known) == {
        "missing": [], "stale": ["other (shares_class_with names no fixture of its class)"]}
    row = [line for line in table(probes, fixtures, known) if line.startswith("| pp |")][0]
    assert "unservable: r" in row


@pytest.mark.parametrize("entry, says", [
    ('model_type = "x"\nreason = "r"\nevidence = ""\nconfirmed_by = "README.md"',
     "x: unservable needs its reason and the evidence of a real attempt"),
    ('model_type = "x"\nreason = "r"\nevidence = "E"\nconfirmed_by = "reports/nope.py"',
     "x: confirmed_by 'reports/nope.py' is no file of the repository"),
    ('model_type = "x"\nreason = "r"\nevidence = "E"\nconfirmed_by = "README.md"\nwhy = 1',
     "unservable entry 'x': "),
])
def test_a_malformed_entry_is_refused_in_one_line(entry, says, tmp_path):
    path = tmp_path / "coverage.toml"
    path.write_text(f"planned = []\n[[unservable]]\n{entry}\n")
    with pytest.raises(ValueError, match=says):
        catalogue.load(path)


def test_the_readme_architecture_table_is_current():
    from conformance.cli.coverage import README, readme_table, readme_with

    probes = catalogue.read_snapshot()
    lines = readme_table(probes, fixtures_by_architecture(), catalogue.load())
    assert README.read_text() == readme_with(README.read_text(), lines), \
        "run `conformance coverage --snapshot --write`"
    assert any("qwen2_5_omni_thinker" in line for line in lines)


def test_the_coverage_document_is_current():
    probes = catalogue.read_snapshot()
    expected = table_doc(probes, table(probes, fixtures_by_architecture(), catalogue.load()))
    assert TABLE_DOC.read_text() == expected, "run `conformance coverage --snapshot --write`"


@pytest.mark.vllm
def test_the_probe_reads_transformers_and_vllms_registry():
    # the environment's transformers (5.17.0) and vLLM (0.31.0): the facts the issue measured
    from conformance.inputs.coverage import probe

    here = probe()
    found = {c["architecture"]: c for c in here["candidates"]}
    for backend_only in ("Emu3ForConditionalGeneration", "HunYuanVLForConditionalGeneration",
                         "VibeVoiceAsrForConditionalGeneration"):
        assert found[backend_only]["vllm"] == BACKEND_ONLY
    assert found["LlavaForConditionalGeneration"]["vllm"] == NATIVE
    assert found["FuyuForCausalLM"]["vllm"] == FALLBACK
    assert found["Qwen3VLMoeForConditionalGeneration"]["moe"]
    assert not found["Qwen3VLForConditionalGeneration"]["moe"]
    assert found["T5Gemma2ForConditionalGeneration"]["encoder_decoder"]
    # every fixture's architecture this version ships is a candidate: coverage is measured
    # against the same list (a fixture of a newer architecture, omniasr from 5.25, is n/a here)
    shipped = {architecture for architecture, names in fixtures_by_architecture().items()
               if any(get_recipe(name).supports(here["transformers"]) for name in names)}
    assert shipped <= set(found)
    # and the recorded probe of this version is what the probe says now
    recorded = {p["transformers"]: p for p in catalogue.read_snapshot()}
    if here["transformers"] in recorded:
        assert recorded[here["transformers"]] == here, "run `conformance coverage --write`"


def test_an_attempt_is_shown_beside_its_planned_model_type_and_only_there(tmp_path):
    probes = [{"transformers": "5.25.0", "candidates": [candidate("blip-2", "Blip2ForX")]}]
    known = catalogue.Catalogue(frozenset({"blip-2"}), {},
                                {"blip-2": "built: TransformersMultiModalForCausalLM"})
    assert ("| blip-2 | Blip2ForX | native |  | planned; attempt: built: "
            "TransformersMultiModalForCausalLM | ✓ |") in table(probes, {}, known)
    path = tmp_path / "coverage.toml"
    path.write_text('planned = []\n[attempted]\nx = "built"\n')
    with pytest.raises(ValueError, match="attempted lists model types that are not planned: x"):
        catalogue.load(path)
