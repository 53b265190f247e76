"""Every check can fail: a fault planted in `impl` makes the matching check fail, with evidence
naming what went wrong, and the reproducer written for it reproduces it on its own."""

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.cases import Case, Media
from conformance.checks import get_check
from conformance.checks.base import Context
from conformance.faults import FAULTS, planted
from conformance.subjects import ImplSubject
from conformance.suite import run_suite
from fixtures.recipe import Recipe
from fixtures.registry import get_recipe

pytestmark = pytest.mark.vllm

# fault -> (fixture, check, words the evidence must contain)
PLANTED = {
    "offset-shift": ("llava", "placeholders", "expected offset="),
    "wrong-embed-token": ("idefics3", "embed-count", "embedding positions"),
    "wrong-slice-dim": ("idefics3", "slicing", "alone vs batch"),
    "hash-neighbours": ("llava", "cache", "depends on its neighbours"),
    "options-ignored": ("qwen2_vl", "prompt-ids", "prompt ids differ"),
}


def test_every_fault_is_planted_somewhere():
    assert set(PLANTED) | {"no-unpad"} == set(FAULTS)


@pytest.mark.parametrize("fault", sorted(PLANTED))
def test_the_matching_check_fails_with_evidence(fault, tmp_path):
    fixture, check, words = PLANTED[fault]
    recipe = get_recipe(fixture)
    if fault != "options-ignored":  # the architecture's default options: a clean baseline
        recipe = dataclasses.replace(recipe, processor_options=())
    assert run_suite(fixture, "impl", check, repro_dir=tmp_path, recipe=recipe).status == "pass"
    result = run_suite(fixture, "impl", check, fault=fault, repro_dir=tmp_path, recipe=recipe)
    assert result.status == "fail", result
    assert words in result.evidence, result.evidence
    assert Path(result.reproducer).exists()


def test_a_finding_behind_an_option_is_searched_after_the_default_options(tmp_path):
    result = run_suite("qwen2_vl", "impl", "prompt-ids", fault="options-ignored",
                       repro_dir=tmp_path)
    assert result.status == "fail"
    assert dict(result.case.processor_kwargs) == {"max_pixels": 28 * 28}
    assert "(with max_pixels=784)" in result.evidence


def test_a_reproducer_reproduces_its_planted_fault_on_its_own(tmp_path):
    result = run_suite("llava", "impl", "placeholders", fault="offset-shift", repro_dir=tmp_path)
    run = subprocess.run([sys.executable, result.reproducer], capture_output=True, text=True)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "placeholders: FAILS" in run.stdout and "expected offset=" in run.stdout
    source = Path(result.reproducer).read_text()
    assert "FAULT = 'offset-shift'" in source and "TRANSFORMERS = " in source


def fake_context(processor) -> Context:
    recipe = Recipe(name="fake", architecture="Fake", modalities=("image",),
                    placeholder={"image": "<image>"}, prompt="{0}", make=None, mirrors="-")
    subject = ImplSubject("unused", recipe)
    subject.__dict__.update(_processors={(): processor}, config=None)
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
    ctx.subject.fault = "no-unpad"
    outcome = slicing.run(ctx, case)
    assert not outcome.ok and "alone vs batch" in outcome.evidence and "shape" in outcome.evidence


def test_planted_restores_impl_afterwards():
    import impl.pipeline

    before = impl.pipeline.process
    with planted("offset-shift"):
        assert impl.pipeline.process is not before
    assert impl.pipeline.process is before
