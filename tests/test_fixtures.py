"""Every recipe builds offline, deterministically, in hub layout, and loads in transformers."""

import json

import pytest
import transformers

from fixtures.build import build_fixture, fixture_path, tree_digest, write_checkpoint
from fixtures.registry import RECIPE_MODULES, REPRESENTATIVE, available_recipes, get_recipe

RECIPES = [name for name in available_recipes() if get_recipe(name).supports(
    transformers.__version__)]


def test_the_foundation_recipes_exist():
    assert set(RECIPE_MODULES[:5]) <= set(available_recipes())


def test_the_representative_fixtures_exist():
    assert set(REPRESENTATIVE) <= set(available_recipes())


@pytest.mark.parametrize("name", RECIPES)
def test_same_recipe_and_version_give_the_same_bytes(name, tmp_path):
    recipe = get_recipe(name)
    write_checkpoint(recipe, recipe.make("tiny"), tmp_path / "a")
    write_checkpoint(recipe, recipe.make("tiny"), tmp_path / "b")
    assert tree_digest(tmp_path / "a") == tree_digest(tmp_path / "b")


@pytest.mark.parametrize("name", RECIPES)
def test_checkpoint_is_complete_and_cached_by_version(name):
    path = build_fixture(name)
    files = {p.name for p in path.iterdir()}
    assert {"config.json", "model.safetensors", "processor_config.json"} <= files
    assert "tokenizer.json" in files or "tekken.json" in files
    assert f"tf{transformers.__version__}" in path.name
    assert fixture_path(name) == path
    config = json.loads((path / "config.json").read_text())
    assert config["architectures"] == [get_recipe(name).architecture]


@pytest.mark.parametrize("name", RECIPES)
def test_weights_load_in_transformers_with_no_missing_or_unexpected_keys(name):
    path = build_fixture(name)
    recipe = get_recipe(name)
    model_cls = getattr(transformers, recipe.architecture)
    _, info = model_cls.from_pretrained(path, output_loading_info=True)
    assert not info["missing_keys"], sorted(info["missing_keys"])[:5]
    assert not info["unexpected_keys"], sorted(info["unexpected_keys"])[:5]


@pytest.mark.parametrize("name", RECIPES)
def test_no_weight_of_a_fixture_is_constant(name):
    # a constant tensor (an all-zero projector) makes every item embed alike: checks comparing
    # embeddings or logits could not see wrong data
    from safetensors.torch import load_file

    tensors = load_file(build_fixture(name) / "model.safetensors")
    # an infinite bound (Gemma 4's clipped linears: input_min = -inf) clips nothing and cannot
    # be varied, and one value (Gemma 4's layer_scalar) is no constant spread: neither hides a
    # difference (the builder varies single values too)
    constant = sorted(key for key, t in tensors.items() if t.is_floating_point()
                      and t.numel() > 1 and bool(t.isfinite().all())
                      and bool((t == t.reshape(-1)[0]).all()))
    assert not constant, constant[:8]


@pytest.mark.parametrize("name", RECIPES)
def test_processor_loads_and_serves_the_recipes_modalities(name):
    from impl.info import supported_modalities

    processor = transformers.AutoProcessor.from_pretrained(build_fixture(name))
    assert processor.tokenizer is not None
    assert set(get_recipe(name).modalities) <= set(supported_modalities(processor))


def test_hub_layout_renames_are_applied():
    from safetensors import safe_open

    path = build_fixture("llava")
    with safe_open(str(path / "model.safetensors"), "pt") as weights:
        keys = list(weights.keys())
    assert any(k.startswith("vision_tower.vision_model.embeddings.") for k in keys)
    assert not any(k.startswith("vision_tower.embeddings.") for k in keys)


def test_the_digest_covers_every_module_of_ours_a_recipe_is_built_from():
    from fixtures.build import ROOT, build_sources

    files = {
        p.relative_to(ROOT).as_posix()
        for p in build_sources("fixtures.recipes.qwen2_vl", "fixtures.build")
    }
    assert {
        "fixtures/recipes/qwen2_vl.py", "fixtures/families/__init__.py",
        "fixtures/families/qwen_vl.py", "fixtures/tokenizer.py", "fixtures/sizes.py",
        "fixtures/recipe.py", "fixtures/build.py", "impl/version.py",
    } <= files
    assert "fixtures/families/llava.py" not in files
    assert all(f.startswith(("fixtures/", "impl/")) for f in files)


def test_editing_a_family_changes_the_digest_of_its_recipes_only(tmp_path, monkeypatch):
    import shutil

    from fixtures import build

    for package in build.OUR_PACKAGES:
        shutil.copytree(build.ROOT / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(build, "ROOT", tmp_path)

    def digests():
        return {n: build.recipe_digest(get_recipe(n), "tiny") for n in ("qwen2_vl", "llava")}

    before = digests()
    with (tmp_path / "fixtures" / "families" / "qwen_vl.py").open("a") as family:
        family.write("# edited\n")
    after = digests()
    assert after["qwen2_vl"] != before["qwen2_vl"]
    assert after["llava"] == before["llava"]


def test_unknown_fixture_is_a_clear_error():
    with pytest.raises(KeyError, match="unknown fixture 'nope'"):
        get_recipe("nope")


def test_a_tekken_only_checkpoint_gets_the_mistral_tokenizer(tmp_path):
    """A Transformers-format folder whose tokenizer is only tekken.json (Voxtral Realtime) is
    served by both implementations with tokenizer_mode "mistral"; one with tokenizer.json, or
    with the Mistral-format half too, is not."""
    from conformance.subjects import vllm as oracle

    for name in ("config.json", "tekken.json", "model.safetensors"):
        (tmp_path / name).write_text("{}")
    for impl in ("vllm", "transformers"):
        assert oracle.checkpoint_format(str(tmp_path), impl) == {"tokenizer_mode": "mistral"}
        assert oracle.load_options(str(tmp_path), impl) == {}
    (tmp_path / "tokenizer.json").write_text("{}")
    assert oracle.checkpoint_format(str(tmp_path), "transformers") == {}
    (tmp_path / "tokenizer.json").unlink()
    for name in ("params.json", "consolidated.safetensors"):
        (tmp_path / name).write_text("{}")
    assert oracle.checkpoint_format(str(tmp_path), "transformers")["config_format"] == "hf"
    assert "tokenizer_mode" not in oracle.checkpoint_format(str(tmp_path), "transformers")


@pytest.mark.vllm
def test_voxtral_mistral_half_serves_native_vllm():
    """The Mistral-format half (params.json, consolidated.safetensors) is what vLLM's native
    Voxtral reads; a token prompt (tekken makes no special tokens from text) gets one
    placeholder of 375 [AUDIO] per audio of up to 30 s."""
    import numpy as np

    from conformance.subjects import vllm as oracle
    from fixtures.recipes.voxtral import AUDIO_ID, TOKENS_PER_CHUNK

    path = str(build_fixture("voxtral"))
    assert oracle.checkpoint_format(path, "vllm")["config_format"] == "mistral"
    assert oracle.checkpoint_format(path, "transformers")["config_format"] == "hf"
    processor = oracle.create_processor(path, "vllm", {"audio": 2})
    begin_audio = AUDIO_ID + 1
    ids = [1, 3] + ([begin_audio] + [AUDIO_ID] * TOKENS_PER_CHUNK) * 2 + [100, 101, 4]
    rng = np.random.default_rng(0)
    audios = [(rng.uniform(-0.5, 0.5, n).astype(np.float32), 16000) for n in (16000, 40000)]
    out = processor(ids, processor.info.parse_mm_data({"audio": audios}))
    assert out["prompt_token_ids"] == ids
    ranges = [(r.offset, r.length) for r in out["mm_placeholders"]["audio"]]
    assert ranges == [(3, TOKENS_PER_CHUNK), (3 + TOKENS_PER_CHUNK + 1, TOKENS_PER_CHUNK)]


def test_vllms_decoration_of_transformers_classes_is_seen(monkeypatch):
    import sys
    import types

    from fixtures.build import transformers_decorated_by_vllm

    class Wrapper:  # stands in for vLLM's torch.compile base class
        pass

    decorators = types.ModuleType("vllm.compilation.decorators")
    decorators.TorchCompileWithNoGuardsWrapper = Wrapper
    monkeypatch.setitem(sys.modules, "vllm.compilation.decorators", decorators)
    type("NativeModel", (Wrapper,), {"__module__": "vllm.model_executor.models.llava"})
    assert not transformers_decorated_by_vllm()  # vLLM's own classes do not count
    decorated = type("LlamaModel", (Wrapper,),
                     {"__module__": "transformers.models.llama.modeling_llama"})
    assert transformers_decorated_by_vllm()
    del decorated


def test_a_fixture_built_in_a_fresh_process_has_the_same_bytes(monkeypatch, tmp_path):
    # what happens once the backend has loaded a model in the process (vLLM's decoration)
    from fixtures import build

    monkeypatch.setenv("CONFORMANCE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(build, "transformers_decorated_by_vllm", lambda: True)
    fresh = []
    monkeypatch.setattr(build, "write_in_fresh_process",
                        lambda *a, real=build.write_in_fresh_process: (fresh.append(a), real(*a)))
    path = build_fixture("llava")
    assert fresh and path.parent == tmp_path / "cache" / "fixtures"
    recipe = get_recipe("llava")
    write_checkpoint(recipe, recipe.make("tiny"), tmp_path / "here")
    assert tree_digest(path) == tree_digest(tmp_path / "here")
