"""Every check can fail: the planted fault each check declares (its `Proof`) makes it fail on
its fixture, with evidence naming what went wrong, where the same cell without the fault passes
(or shows only its known finding). Read from the check registry: a new check brings its proof.
"""

import dataclasses
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
import torch
import transformers

from conformance.checks import get_check, registry
from conformance.checks.model.references import HF_PREFIX
from conformance.inputs.cases import Case
from conformance.inputs.forms import options_key
from conformance.inputs.media import Media, smoke_media
from conformance.results.verdict import CellKey
from conformance.run.cell import run_checkpoint
from conformance.run.plan import key_here
from conformance.run.suite import run_suite
from conformance.subjects.context import Context, fixture_path, make_context
from conformance.subjects.faults import FAULTS, MEDIA_FAULTS, Fault, planted
from conformance.subjects.impl import ImplSubject
from fixtures.recipe import Recipe
from fixtures.registry import available_recipes
from fixtures.variants import get_recipe  # a proof may name a config variant (llava~last_layer)

pytestmark = pytest.mark.vllm

CASE_CHECKS = [c.id for c in registry().values() if c.level == "case"]
CHECKPOINT_CHECKS = [c.id for c in registry().values() if c.level == "checkpoint"]


def test_every_fault_proves_a_check():
    proven = {proof.fault.partition(">=")[0] for check in registry().values()
              for proof in (check.proof, *check.more_proofs)}
    # no-unpad needs a processor that pads a batch, which only the fake one below does
    assert proven | {"no-unpad"} == set(FAULTS) | set(MEDIA_FAULTS)


@pytest.mark.parametrize("check_id", CASE_CHECKS)
def test_the_fault_a_case_check_declares_makes_it_fail(check_id, tmp_path):
    proof = get_check(check_id).proof
    recipe = get_recipe(proof.fixture)
    if proof.fault != "options-ignored":  # the architecture's default options: a clean baseline
        recipe = dataclasses.replace(recipe, processor_options=())
    key = key_here(proof.fixture, "impl", check_id)
    clean = run_suite(key, repro_dir=tmp_path, recipe=recipe)
    assert clean.status in ("pass", "xfail"), clean
    faulty = run_suite(key, fault=Fault.parse(proof.fault), repro_dir=tmp_path, recipe=recipe)
    assert faulty.status == "fail", faulty
    assert proof.evidence in faulty.detail, faulty.detail
    assert Path(faulty.data["reproducer"]).exists()


@pytest.mark.parametrize("check_id, proof", [
    (c.id, proof) for c in registry().values() if c.level == "case" for proof in c.more_proofs])
def test_the_backend_fault_a_sub_property_declares_makes_it_fail(check_id, proof, tmp_path):
    # a sub-property only the backend claims (its own steps, compared with impl's): the
    # backend fault is planted around the whole cell, as `conformance run` plants it
    key = key_here(proof.fixture, proof.subject, check_id)
    clean = run_suite(key, repro_dir=tmp_path)
    assert clean.status in ("pass", "xfail"), clean
    fault = Fault.parse(proof.fault).on(transformers.__version__)
    if fault is None:
        pytest.skip(f"{proof.fault}: not planted under transformers {transformers.__version__}")
    if proof.sub_property and proof.sub_property not in clean.data.get("exercised", []):
        pytest.skip(f"{proof.subject} does not claim {proof.sub_property!r} on transformers "
                    f"{transformers.__version__} and this vLLM (rows: not on the Legacy path; "
                    "mixed modalities: vLLM 0.32.0 on >= 5.18, tests/conformance/test_mixed.py)")
    with planted(fault):
        faulty = run_suite(key, repro_dir=tmp_path)
    assert faulty.status == "fail", faulty
    assert proof.evidence in faulty.detail, faulty.detail


@pytest.mark.parametrize("check_id", [
    pytest.param(c, marks=pytest.mark.model) if get_check(c).loads_model else c
    for c in CHECKPOINT_CHECKS])
def test_the_fault_a_checkpoint_check_declares_makes_it_fail(check_id):
    assert_clean_then_failing(check_id, get_check(check_id).proof, "vllm-backend")


@pytest.mark.model
@pytest.mark.parametrize("check_id, proof", [
    (c.id, proof) for c in registry().values() if c.level == "checkpoint"
    for proof in c.more_proofs if proof.sub_property != "hf"])
def test_a_further_fault_a_checkpoint_check_declares_makes_it_fail(check_id, proof):
    # a sub-property the main proof does not reach (mrope's text-only request)
    assert_clean_then_failing(check_id, proof, proof.subject)


def assert_clean_then_failing(check_id, proof, subject):
    """The checkpoint-level cell passes clean, or shows only known findings none of whose
    differences is the proof's (else the proof cannot speak: skipped), and fails with the
    proof's evidence once its fault is planted: the fault's difference is no finding's."""
    check, version = get_check(check_id), transformers.__version__
    recipe = get_recipe(proof.fixture)
    key = CellKey(proof.fixture, version, subject, check_id)
    clean = run_checkpoint(key, recipe, check, lambda: fixture_path(proof.fixture))
    known_beside = clean.status == "xfail" and not any(
        proof.evidence in text for text in (clean.evidence.texts() if clean.evidence else ()))
    if clean.status != "pass" and not known_beside:
        pytest.skip(f"{check_id} on {proof.fixture} is {clean.status} on transformers {version} "
                    f"({clean.finding or clean.detail[:120]}): the proof needs a clean cell")
    faulty = run_checkpoint(key, recipe, check, lambda: fixture_path(proof.fixture),
                            fault=Fault.parse(proof.fault))
    assert faulty.status == "fail", faulty
    assert proof.evidence in faulty.detail, faulty.detail


@pytest.mark.model
@pytest.mark.parametrize("check_id, proof", [
    (c.id, proof) for c in registry().values() if c.level == "checkpoint"
    for proof in c.more_proofs if proof.sub_property == "hf"])
def test_a_model_check_fails_through_the_hf_model_alone(check_id, proof):
    # the fixture has no native vLLM model: the HF model is its only reference
    check, version = get_check(check_id), transformers.__version__
    recipe = get_recipe(proof.fixture)
    assert not recipe.native_in_vllm
    key = CellKey(proof.fixture, version, proof.subject, check_id)
    clean = run_checkpoint(key, recipe, check, lambda: fixture_path(proof.fixture))
    assert clean.status in ("pass", "xfail"), clean
    faulty = run_checkpoint(key, recipe, check, lambda: fixture_path(proof.fixture),
                            fault=Fault.parse(proof.fault))
    assert faulty.status == "fail", faulty
    # on the Legacy path aya_vision's backend cannot place the images
    # (legacy-structure-tokens-embedded): the fault shows through the text-only request
    text_only = proof.evidence.replace(HF_PREFIX, f"{HF_PREFIX}text only: ", 1)
    assert proof.evidence in faulty.detail or text_only in faulty.detail, faulty.detail


NATIVE_FIXTURES = [name for name in available_recipes() if get_recipe(name).native_in_vllm]


@pytest.mark.model
@pytest.mark.every_fixture  # the others with -m slow
@pytest.mark.parametrize("fixture", NATIVE_FIXTURES)
def test_the_encoder_check_sees_swapped_items_on_every_fixture(fixture):
    # sensitivity on every fixture, not only the proof's: two distinct items swapped in the
    # backend's request must change what the encoder check compares (a fixture whose weights
    # embed every item alike, like an all-zero projector, would pass)
    check, version = get_check("encoder"), transformers.__version__
    recipe, key = get_recipe(fixture), CellKey(fixture, version, "vllm-backend", "encoder")
    from conformance.checks.model.inputs import two_item_inputs

    if len(two_item_inputs(recipe, str(fixture_path(fixture)))[2]) < 2:
        pytest.skip(f"native vLLM takes one {recipe.modalities[0]} per prompt for {fixture}: "
                    "nothing to swap")
    clean = run_checkpoint(key, recipe, check, lambda: fixture_path(fixture))
    if clean.status != "pass":
        pytest.skip(f"encoder on {fixture} is {clean.status} on {version}: needs a clean cell")
    faulty = run_checkpoint(key, recipe, check, lambda: fixture_path(fixture),
                            fault=Fault("swapped-items"))
    assert faulty.status == "fail", faulty


def test_a_finding_behind_an_option_is_searched_after_the_default_options(tmp_path):
    verdict = run_suite(key_here("qwen2_vl", "impl", "prompt-ids"),
                        fault=Fault("options-ignored"), repro_dir=tmp_path)
    assert verdict.status == "fail"
    assert dict(Case.from_json(verdict.data["case"]).processor_kwargs) == {"max_pixels": 28 * 28}
    assert "(with max_pixels=784)" in verdict.detail


@pytest.mark.e2e  # runs the reproducer script in its own process
def test_a_reproducer_reproduces_its_planted_fault_on_its_own(tmp_path):
    verdict = run_suite(key_here("llava", "impl", "placeholders"), fault=Fault("offset-shift"),
                        repro_dir=tmp_path)
    reproducer = verdict.data["reproducer"]
    run = subprocess.run([sys.executable, reproducer], capture_output=True, text=True)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "placeholders: FAILS" in run.stdout and "ranges differ" in run.stdout
    source = Path(reproducer).read_text()
    assert "FAULT = 'offset-shift'" in source and "TRANSFORMERS = " in source


def fake_context(processor) -> Context:
    recipe = Recipe(name="fake", architecture="Fake", modalities=("image",),
                    placeholder={"image": "<image>"}, prompt="{0}", make=None, mirrors="-")
    subject = ImplSubject("unused", recipe)
    subject.__dict__.update(_processors={("unused", options_key(())): processor}, config=None)
    return Context("fake", "unused", recipe, subject, {})


def test_disabled_unpadding_fails_slicing_on_a_padding_processor():
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "impl"))
    from impl_fakes import FakeProcessor

    ctx = fake_context(FakeProcessor())
    case = Case("fake", "image", ("a ", " b ", ""),
                (Media("image", height=20, width=30, seed=1),
                 Media("image", height=40, width=10, seed=2)))
    slicing = get_check("slicing")
    assert slicing.run(ctx, case).ok
    ctx.subject.fault = Fault("no-unpad")
    outcome = slicing.run(ctx, case)
    assert not outcome.ok and "alone vs batch" in outcome.evidence and "shape" in outcome.evidence


def test_planted_restores_impl_afterwards():
    import impl.pipeline

    before = impl.pipeline.process
    with planted(Fault("offset-shift")):
        assert impl.pipeline.process is not before
    assert impl.pipeline.process is before


def with_item_fields(change) -> mock._patch:
    """impl's output with every item's fields changed alike, alone and in a batch (a change
    comparing the subject with itself cannot see)."""
    import impl.pipeline

    original = impl.pipeline.process

    def process(*args, **kwargs):
        out = original(*args, **kwargs)
        fields = {m: [change(dict(f)) for f in items] for m, items in out.item_fields.items()}
        return dataclasses.replace(out, item_fields=fields)

    return mock.patch("impl.pipeline.process", process)


def fresh_context(fixture: str) -> Context:
    """impl on `fixture`, remembering no output (a patched impl computes new ones)."""
    ctx = make_context(fixture, "impl")
    return dataclasses.replace(ctx, _memo={})


def test_slicing_sees_a_helper_field_the_hf_processor_does_not_return():
    # the backend's `image_replacement_ids` left in the item (as mutant
    # offsets-replacement-ids-kept leaves it): the same alone and in a batch
    case = Case("llava", "image", ("a ", " b ", ""), tuple(smoke_media("image", 2)))
    slicing = get_check("slicing")
    assert slicing.run(fresh_context("llava"), case).ok

    def keep_ids(item):
        return {**item, "image_replacement_ids": torch.tensor([7, 7, 7])}

    with with_item_fields(keep_ids):
        outcome = slicing.run(fresh_context("llava"), case)
    assert not outcome.ok and "alone vs the HF processor" in outcome.evidence
    assert "extra ['image_replacement_ids']" in outcome.evidence
    assert "alone vs batch" in outcome.exercised


def test_embed_count_sees_a_token_count_that_is_not_the_embedding_positions():
    # num_audio_tokens counting two markers as well (a replacement's length taken for it)
    case = Case("qwen2_audio", "audio", ("a ", " b ", ""), tuple(smoke_media("audio", 2)))
    embed_count = get_check("embed-count")
    outcome = embed_count.run(fresh_context("qwen2_audio"), case)
    assert outcome.ok and outcome.exercised == {"embedding positions", "token count"}

    def with_markers(item):
        return {**item, "num_audio_tokens": item["num_audio_tokens"] + 2}

    with with_item_fields(with_markers):
        outcome = embed_count.run(fresh_context("qwen2_audio"), case)
    assert not outcome.ok and "num_audio_tokens" in outcome.evidence, outcome
    assert "embedding positions" in outcome.evidence
