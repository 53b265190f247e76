"""Config variants (fixtures/variants/): each builds as a fixture of its own, sets what it
says, leaves every fixture's cache key alone, and changes something a reader can see."""

import json

import pytest
import transformers

from fixtures.build import ROOT, build_sources, recipe_digest
from fixtures.registry import available_recipes
from fixtures.registry import get_recipe as base_recipe
from fixtures.variants import (
    NO_VARIANT,
    VARIANTS,
    build_fixture,
    check,
    digest,
    get_recipe,
    get_variant,
    known_names,
    variant_names,
)

NAMES = [n for n in variant_names() if get_recipe(n).supports(transformers.__version__)]


def test_every_variant_belongs_to_a_fixture_and_says_why_and_where_from():
    assert set(VARIANTS) <= set(available_recipes())
    assert len(variant_names()) >= 6
    for name in variant_names():
        variant = get_variant(name)
        assert variant.reason and variant.source, name
        assert variant.config or variant.processor or variant.config_json or \
            variant.weights != "hub", f"{name} changes nothing"
    assert set(variant_names()) <= set(known_names())


def test_a_variant_is_its_base_recipe_renamed():
    recipe, base = get_recipe("llava~full"), base_recipe("llava")
    assert recipe.name == "llava~full" and recipe.architecture == base.architecture
    assert recipe.prompt == base.prompt and recipe.modalities == base.modalities
    assert get_recipe("llava") is base and get_variant("llava") is None
    assert get_recipe("llava~saved").key_renames == () and base.key_renames
    with pytest.raises(KeyError, match="variants of llava: full"):
        get_recipe("llava~nope")


def test_every_fixture_has_a_variant_or_a_written_reason_it_has_none():
    assert check() == []
    assert set(VARIANTS) | set(NO_VARIANT) == set(available_recipes())


def test_no_fixture_is_built_from_the_variants_package():
    # a fixture's cache key hashes the modules it is built from: editing a variant must never
    # change a fixture's key (nor rebuild it)
    package = ROOT / "fixtures" / "variants"
    for name in available_recipes():
        sources = build_sources(f"fixtures.recipes.{name}", "fixtures.build")
        assert not any(package in path.parents for path in sources), name
        assert digest(name, "tiny") == recipe_digest(base_recipe(name), "tiny")


def test_each_variant_has_a_key_of_its_own():
    keys = {digest(name, "tiny") for name in variant_names()}
    bases = {digest(name, "tiny") for name in VARIANTS}
    assert len(keys) == len(variant_names()) and not keys & bases


def _config(name: str) -> dict:
    return json.loads((build_fixture(name) / "config.json").read_text())


def _path_value(config: dict, path: str):
    for part in path.split("."):
        config = config[part]
    return config


@pytest.mark.parametrize("name", NAMES)
def test_the_built_variant_holds_its_overrides(name):
    variant, config = get_variant(name), _config(name)
    assert config["architectures"] == [get_recipe(name).architecture]
    for path, value in variant.config:
        if not callable(value):
            assert _path_value(config, path) == value, path
    if variant.processor:
        processor = transformers.AutoProcessor.from_pretrained(build_fixture(name))
        for path, value in variant.processor:
            found = processor
            for part in path.split("."):
                found = getattr(found, part)
            if isinstance(value, dict):  # a size, read back as transformers' SizeDict
                found = {key: found[key] for key in value}
            assert found == value, path


def test_the_layouts_and_config_edits_are_as_declared():
    from safetensors import safe_open

    with safe_open(str(build_fixture("llava~saved") / "model.safetensors"), "pt") as weights:
        keys = list(weights.keys())
    # transformers 5's own names: the tower flattened, not the hub's vision_model nesting
    assert any(k.startswith("vision_tower.embeddings.") for k in keys)
    assert not any(k.startswith("vision_tower.vision_model.") for k in keys)
    assert "tie_word_embeddings" not in _config("mistral3~tie_absent")
    assert "tie_word_embeddings" in _config("mistral3")


def _next_token_logprobs(name: str):
    import numpy as np
    import torch
    from PIL import Image

    path = build_fixture(name)
    recipe = get_recipe(name)
    model = getattr(transformers, recipe.architecture).from_pretrained(
        path, dtype=torch.float32).eval()
    processor = transformers.AutoProcessor.from_pretrained(path)
    image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (40, 56, 3), np.uint8))
    inputs = processor(text=recipe.render_prompt("image", 1), images=[image],
                       return_tensors="pt")
    with torch.inference_mode():
        logits = model(**inputs).logits[0, -1].float()
    return inputs, torch.log_softmax(logits, -1)


@pytest.mark.parametrize("name", NAMES)
def test_every_variant_changes_what_it_says_it_changes(name):
    """A variant whose override nothing reads would test nothing: its HF model's next-token
    logprobs (effect "model"), its processor's output ("processor") or the files a loader reads
    ("loading": the same weights, under other names or another config.json) differ from its
    base fixture's. (Why PaliGemma 2's final_logit_softcapping has no variant: at the tiny
    size a cap of 30 moves logits of about 0.1 by about 1e-7, below any tolerance.)"""
    import torch

    variant, base = get_variant(name), name.partition("~")[0]
    if variant.effect == "loading":
        files = ("config.json", "model.safetensors")
        assert any((build_fixture(name) / f).read_bytes() != (build_fixture(base) / f).read_bytes()
                   for f in files)
        return
    inputs, logprobs = _next_token_logprobs(name)
    base_inputs, base_logprobs = _next_token_logprobs(base)
    if variant.effect == "processor":
        # its counts, or the data of its items (idefics3~scale4: as many tokens, larger tiles)
        assert any(inputs[k].shape != base_inputs[k].shape or not torch.equal(inputs[k],
                                                                              base_inputs[k])
                   for k in inputs)
    assert (logprobs - base_logprobs).abs().max() > 1e-3


def test_variants_join_a_run_only_when_asked():
    from conformance.cli import build_parser
    from conformance.cli.run import selected_fixtures

    assert selected_fixtures("llava,gemma3", False) == ("llava", "gemma3")
    assert selected_fixtures("llava,gemma3", True) == (
        "llava", "gemma3", *variant_names(("llava", "gemma3")))
    assert "gemma3~qps168" in variant_names(("llava", "gemma3"))
    assert selected_fixtures("llava~full", False) == ("llava~full",)
    assert not any("~" in n for n in selected_fixtures(None, False))
    assert build_parser().parse_args(["run", "--variants"]).variants


def test_the_fixtures_document_lists_every_variant():
    text = (ROOT / "docs" / "fixtures.md").read_text()
    section = text.split("## Config variants", 1)[1].split("\n## ", 1)[0]
    for name in variant_names():
        assert f"| `{name}` |" in section, name


def test_a_reference_that_cannot_load_is_known_only_by_a_finding_naming_its_error():
    from conformance.results.judge import judge
    from conformance.results.verdict import CellKey

    error = ("error: ValueError: There is no module or parameter named 'vision_tower.embeddings' "
             "in LlavaForConditionalGeneration. The available parameters ...")
    refused = {"references": {"backend vs hf": "agrees", "native": error}}
    saved = CellKey("llava~saved", "5.17.0", "vllm-backend", "model")
    verdict = judge(saved, [], exhaustive=True, data=refused)
    assert verdict.status == "xfail" and verdict.finding == "llava-native-refuses-saved-layout"
    assert "native reference could not run" in verdict.detail
    # native loading it again: the finding is stale
    loaded = {"references": {"backend vs hf": "agrees", "backend vs native": "agrees"}}
    assert judge(saved, [], exhaustive=True, data=loaded).status == "xpass"
    # no finding names the error on another fixture: judged against the HF model, a pass
    other = CellKey("llava", "5.17.0", "vllm-backend", "model")
    assert judge(other, [], exhaustive=True, data=refused).status == "pass"


def test_a_fixtures_findings_hold_for_its_variants_and_a_variants_for_it_alone():
    from conformance.expectations import parse

    base = parse({"id": "b", "title": "t", "reason": "r", "fixtures": ["llava"],
                  "evidence": {"cache@llava": ["token 42"]}})
    assert base.applies("llava~full", "cache", "5.17.0")
    assert base.shown_by("cache", "image token 42 differs", "llava~full")
    assert not base.applies("llava_next~granite_text", "cache", "5.17.0")
    own = parse({"id": "v", "title": "t", "reason": "r", "fixtures": ["llava~full"],
                 "evidence": {"cache": ["token 42"]}})
    assert own.applies("llava~full", "cache", "5.17.0")
    assert not own.applies("llava", "cache", "5.17.0")
    assert not own.applies("llava~layers", "cache", "5.17.0")
