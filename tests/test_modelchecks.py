"""Model-level parity on every fixture, on CPU: vLLM's Transformers backend (and impl driving
the HF model) against native vLLM's (where vLLM has a native model) and the HF model's own
encoder outputs, M-RoPE positions and greedy decoding.

A genuine disagreement is a finding in conformance/expectations/findings.toml: its evidence
is matched, then the test is marked xfail with the reason. Planted faults prove the checks can fail.
Models are shared by every test through conformance.checks.model.CACHE: each loads once.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import pytest
import torch
import transformers

from conformance.checks import NotApplicable, get_check
from conformance.checks import model as mc
from conformance.results.verdict import CellKey
from conformance.run.cell import run_checkpoint
from conformance.subjects.faults import swap_first_two
from fixtures.build import build_fixture
from fixtures.registry import available_recipes, get_recipe

pytestmark = pytest.mark.model

FIXTURES = available_recipes()


@functools.cache
def builds() -> dict[str, str | ImportError]:
    """Every fixture, built before any model loads: once vLLM's backend has loaded, it has
    decorated transformers' model classes so that they cannot be instantiated without a
    current vLLM config, and a fixture rebuilt later would fail."""
    paths: dict[str, str | ImportError] = {}
    for name in FIXTURES:
        if not get_recipe(name).supports(transformers.__version__):
            continue  # a newer architecture (llava_onevision1_5 from 5.25): not here
        try:
            paths[name] = str(build_fixture(name))
        except ImportError as error:  # an optional dependency (gemma3n's timm) is missing
            paths[name] = error
    return paths


def checkpoint(name: str) -> str:
    path = builds()[name]
    if isinstance(path, ImportError):
        pytest.skip(f"{name} cannot be built here: {str(path).strip().splitlines()[0]}")
    return path


def run_check(fixture: str, check: str) -> dict:
    """The check's data, through the one cell runner and judge: a listed finding is xfail."""
    recipe = get_recipe(fixture)
    if not recipe.supports(transformers.__version__):
        pytest.skip(f"{recipe.architecture} not in transformers {transformers.__version__}")
    path = checkpoint(fixture)
    key = CellKey(fixture, transformers.__version__, "vllm-backend", check)
    verdict = run_checkpoint(key, recipe, get_check(check), lambda: path)
    if verdict.status == "n/a":
        pytest.skip(verdict.detail)
    if verdict.status == "xfail":
        pytest.xfail(verdict.finding)  # the finding id: one line in the summary
    assert verdict.status == "pass", f"{verdict.status}: {verdict.detail}"
    return verdict.data


@pytest.mark.matrix  # the main job judges these cells
@pytest.mark.parametrize("fixture", FIXTURES)
def test_encoder_outputs_match_every_reference(fixture: str) -> None:
    data = run_check(fixture, "encoder")
    for subject in mc.subjects_compared():
        compared = [data[subject], data[f"{subject} vs hf"]]
        rows = [row for per in compared for per_modality in per.values() for row in per_modality]
        assert rows and all(row["allclose"] and "rel_l2" in row for row in rows), compared
        assert data["references"][f"{subject} vs hf"] == "agrees"


def test_nested_items_have_distinct_token_counts_on_pixtral() -> None:
    data = run_check("pixtral", "encoder")
    shapes = data["nested items"]["native"]["image"]
    assert shapes[0][0] < shapes[1][0], shapes  # the smaller first, so its sizes fit the next
    assert all(row["allclose"] for s in mc.subjects_compared()
               for row in data["nested items"][s]["image"])


def test_first_items_sizes_for_every_item_fail_encoder_as_a_comparison(monkeypatch) -> None:
    # every item encoded with the first item's per-item kwargs (pixtral's `image_sizes`): the
    # recipe's items (other aspect ratios) make the tower raise, the nested ones are cropped,
    # so the evidence holds a comparison with native's embeddings, not only an exception
    from vllm.model_executor.models.transformers.multimodal import MultiModalMixin

    select = MultiModalMixin._select_item_kwargs
    monkeypatch.setattr(MultiModalMixin, "_select_item_kwargs",
                        lambda self, kwargs, index, num_items: select(self, kwargs, 0, num_items))
    evidence, _ = mc.check_encoder(get_recipe("pixtral"), checkpoint("pixtral"))
    assert evidence is not None
    assert "backend on 'nested items': image item 1: shape (4, 64) vs native (12, 64)" in evidence


@pytest.mark.matrix  # the main job judges these cells
@pytest.mark.parametrize("fixture", FIXTURES)
def test_mrope_positions_match_every_reference(fixture: str) -> None:
    data = run_check(fixture, "mrope")
    assert len(data["prompts"]) >= 4
    native = get_recipe(fixture).native_in_vllm  # else the HF model is the only reference
    for row in data["prompts"]:
        for s in mc.subjects_compared():
            if native:
                assert row[s]["mismatched_positions"] == 0, row
            assert row[f"{s} vs hf"]["mismatched_positions"] == 0, row


@pytest.mark.matrix  # the main job judges these cells
@pytest.mark.parametrize("fixture", FIXTURES)
def test_greedy_decoding_matches_every_reference(fixture: str) -> None:
    data = run_check(fixture, "generate")
    assert len(data["backend vs hf"]["hf_tokens"]) == mc.GENERATE_TOKENS
    if get_recipe(fixture).native_in_vllm:
        assert len(data["native_tokens"]) == mc.GENERATE_TOKENS
        assert data["references"]["native vs hf"] == "agree"


def test_mrope_applies_to_qwen2_5_vl_and_not_to_llava() -> None:
    run_check("qwen2_5_vl", "mrope")
    with pytest.raises(NotApplicable, match="does not use M-RoPE"):
        mc.check_mrope(get_recipe("llava"), checkpoint("llava"))


# --- planted faults ----------------------------------------------------------------------------


@contextlib.contextmanager
def scaled(parameter: torch.nn.Parameter, factor: float) -> Iterator[None]:
    original = parameter.detach().clone()
    with torch.no_grad():
        parameter.mul_(factor)
    try:
        yield
    finally:
        with torch.no_grad():
            parameter.copy_(original)


def test_perturbed_native_weight_fails_encoder_naming_the_items() -> None:
    recipe, path = get_recipe("llava"), checkpoint("llava")
    native = mc.vllm_model(recipe, path, mc.NATIVE)
    # not a Linear weight: vLLM's CPU linear layers compute with a copy packed at load time
    weight = dict(native.model.named_parameters())["vision_tower.vision_model.pre_layrnorm.weight"]
    with scaled(weight, 1 + 1e-3):
        evidence, data = mc.check_encoder(recipe, path)
    assert evidence is not None
    for subject in mc.subjects_compared():
        for index in (0, 1):
            assert f"{subject} image item {index}: max abs" in evidence
            assert 1e-4 < data[subject]["image"][index]["rel_l2"] < 1e-2
    assert mc.check_encoder(recipe, path)[0] is None  # restored


def test_images_swapped_in_the_subject_fail_mrope() -> None:
    recipe, path = get_recipe("qwen2_5_vl"), checkpoint("qwen2_5_vl")
    evidence, data = mc.check_mrope(recipe, path, subject_media=swap_first_two)
    assert evidence is not None
    assert "backend on 'recipe prompt, 2 images': " in evidence
    assert "impl on 'recipe prompt, 2 images': " in evidence
    assert data["prompts"][0]["backend"]["mismatched_positions"] > 0
    # the one-image prompt has nothing to swap
    single = next(row for row in data["prompts"] if row["prompt"].startswith("text then one"))
    assert single["backend"]["mismatched_positions"] == 0


def test_the_hf_model_alone_catches_images_swapped_in_the_subject_in_mrope() -> None:
    # the HF-reference path without native vLLM (no fixture without a native model uses
    # M-RoPE): the positions the HF model's forward computes are the only reference
    recipe, path = get_recipe("qwen2_5_vl"), checkpoint("qwen2_5_vl")
    assert mc.check_mrope(recipe, path, references=("hf",))[0] is None
    evidence, data = mc.check_mrope(recipe, path, subject_media=swap_first_two,
                                    references=("hf",))
    assert evidence is not None
    assert evidence.startswith("vs hf: backend on 'recipe prompt, 2 images': ")
    assert "position(s) differ" in evidence and "vs hf [" in evidence
    assert data["prompts"][0]["backend vs hf"]["mismatched_positions"] > 0
    assert "backend" not in data["prompts"][0]  # native vLLM was not asked


def test_images_swapped_in_the_subject_fail_encoder() -> None:
    evidence, data = mc.check_encoder(get_recipe("qwen2_5_vl"), checkpoint("qwen2_5_vl"),
                                      subject_media=swap_first_two)
    assert evidence is not None and "backend image item 0: max abs" in evidence
    assert data["backend"]["image"][0]["rel_l2"] > 0.1


# --- dtype, cache, the decoding rule -----------------------------------------------------------


def test_bfloat16_uses_the_gpu_noise_floor_tolerance() -> None:
    evidence, data = mc.check_encoder(get_recipe("qwen2_5_vl"), checkpoint("qwen2_5_vl"),
                                      dtype="bfloat16")
    assert evidence is None, evidence
    assert data["tolerance"] == "rel-L2 <= 0.025, cosine >= 0.9998"


def test_tolerances_follow_the_noise_floor() -> None:
    assert mc.tolerance_for("float32") == mc.Tolerance(atol=1e-5, rtol=1e-4)
    assert mc.tolerance_for("bf16") == mc.Tolerance(max_rel_l2=0.025, min_cosine=0.9998)
    assert mc.tolerance_for(torch.float16) == mc.Tolerance(max_rel_l2=0.003)
    base = torch.ones(100)
    assert not mc.exceeds(mc.measure(base * (1 + 5e-5), base, mc.tolerance_for("float32")),
                          mc.tolerance_for("float32"))
    assert mc.exceeds(mc.measure(base * (1 + 5e-4), base, mc.tolerance_for("float32")),
                      mc.tolerance_for("float32"))
    assert mc.exceeds(mc.measure(base * 1.03, base, mc.tolerance_for("bfloat16")),
                      mc.tolerance_for("bfloat16"))


def test_models_are_loaded_once_per_key() -> None:
    recipe, path = get_recipe("llava"), checkpoint("llava")
    first = mc.vllm_model(recipe, path, mc.BACKEND)
    assert mc.vllm_model(recipe, path, mc.BACKEND) is first
    assert mc.hf_model(path) is mc.hf_model(path)
    key = mc.cache_key("model", path, mc.BACKEND, "cpu", "float32")
    assert mc.CACHE.seconds[key] > 0


def decoded(tokens: list[int], tops: list[dict[int, float]]) -> mc.Decoded:
    return mc.Decoded((1, 2), tuple(tokens), tuple(tops))


def test_logprobs_rule_accepts_a_divergence_inside_both_top_k() -> None:
    native = decoded([5, 6, 7], [{5: -1.0, 9: -1.1}, {6: -0.5, 8: -0.6}, {7: -0.1}])
    backend = decoded([5, 8, 1], [{5: -1.0, 9: -1.1}, {8: -0.55, 6: -0.56}, {1: -0.2}])
    difference, data = mc.logprobs_difference(native, backend)
    assert difference is None and data["diverged_at"] == 1  # nothing after it compared


def test_logprobs_rule_rejects_a_token_outside_the_other_top_k() -> None:
    native = decoded([5, 6], [{5: -1.0}, {6: -0.5, 8: -0.6}])
    backend = decoded([5, 3], [{5: -1.2}, {3: -0.4, 4: -0.7}])
    difference, data = mc.logprobs_difference(native, backend)
    assert difference is not None and difference.startswith("step 1: native token 6")
    assert data["max_logprob_diff"] == pytest.approx(0.2)


# --- the standalone reproducer of the model checks ---------------------------------------------


# each script loads vLLM and the HF model in a process of its own (about 20 s): one that
# reproduces runs by default, the others with -m slow (the nightly workflow's CPU job)
@pytest.mark.parametrize("fixture, check, status, said", [
    pytest.param("aya_vision", "generate", 1,
                 "backend vs the HF model: FAILS: step 0: logprob of token",
                 marks=pytest.mark.slow),
    pytest.param("llava", "generate", 0, "backend vs native vLLM: agrees",
                 marks=pytest.mark.slow),
    # qwen3-vl-deepstack-dropped: native's rows carry the DeepStack features, the HF model's
    # merged rows do not
    ("qwen3_vl", "encoder", 1, "backend vs native vLLM: FAILS: item 0: shape backend (2, 64) "
                               "vs native vLLM (2, 192)"),
    pytest.param("qwen2_5_vl", "mrope", 0, "backend vs native vLLM: agrees",
                 marks=pytest.mark.slow),
])
def test_a_model_reproducer_runs_alone_and_compares_with_every_reference(
        fixture, check, status, said, tmp_path):
    import subprocess
    import sys

    from conformance.results.standalone import write_standalone
    from conformance.results.verdict import Verdict

    path = checkpoint(fixture)
    cell = Verdict(fixture, transformers.__version__, check, "xfail", detail="observed",
                   subject="vllm-backend")
    script = write_standalone(tmp_path / "repro", cell, get_recipe(fixture), path, path)
    assert script is not None and path not in script.read_text()  # no machine path in it
    alone = tmp_path / "alone"
    alone.mkdir()
    copy = alone / "reproduce.py"
    copy.write_text(script.read_text())
    run = subprocess.run([sys.executable, str(copy), path], capture_output=True, text=True,
                         cwd=alone, timeout=600)
    assert run.returncode == status, run.stdout + run.stderr[-2000:]
    assert said in run.stdout
    assert "backend vs the HF model: agrees" in run.stdout or status == 1


@pytest.mark.model
def test_an_moe_model_loaded_after_a_dense_one_finds_its_expert_group():
    # a worker loads fixtures in any order: groups a dense model's config made (no expert
    # group) are made again, or the MoE model fails 'expert parallel group is not initialized'
    from vllm.config import set_current_vllm_config
    from vllm.distributed import parallel_state

    from conformance.checks.model.loading import ensure_distributed
    from conformance.subjects import vllm as adapter

    ensure_distributed()
    parallel_state.destroy_model_parallel()
    dense = adapter.vllm_config(str(build_fixture("llava")), adapter.NATIVE, {}, "cpu", "float32")
    with set_current_vllm_config(dense):
        parallel_state.initialize_model_parallel(1, 1)  # as a dense model's engine makes them
    assert parallel_state._EP is None
    ensure_distributed()
    assert parallel_state.get_ep_group() is not None
