"""Mixed-modality cases: a drawn case's items with one item of each other modality the subject
takes before them, in one prompt; `slicing` compares each modality's placeholders and field
slices with those it has alone. Fast tests use a fake subject; the backend fault that proves
the sub-property runs where vLLM's backend takes two modalities (vLLM 0.32.0 on transformers
>= 5.18: image and video), behind the `slow` marker, as that vLLM's environment is built on
demand."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conformance.checks.slicing import MIXED, claims, mixed_difference
from conformance.core import vllms
from conformance.inputs.cases import Case
from conformance.inputs.media import Media
from conformance.inputs.strategies import companion
from conformance.paths import ROOT
from conformance.results.verdict import Verdict
from conformance.subjects.context import Context
from conformance.subjects.protocol import VIDEO
from fixtures.registry import get_recipe
from impl.types import Placeholder, ProcessedPrompt

PLACEHOLDERS = {"image": "<I>", "video": "<V>"}
LENGTHS = {"image": 3, "video": 5}


def test_a_mixed_case_writes_each_placeholder_for_its_own_item():
    case = Case("qwen2_vl", "image", ("a", "b", "c"),
                (Media("image", 16, 16, seed=1), Media("image", 20, 16, seed=2)))
    mixed = case.with_companions((companion("video", 1),))
    assert case.prompt(PLACEHOLDERS) == case.prompt("<I>") == "a<I>b<I>c"
    assert mixed.prompt(PLACEHOLDERS) == "a<V> <I>b<I>c"
    assert mixed.modalities == ("video", "image")
    assert [len(v) for v in mixed.mm_data().values()] == [1, 2]
    assert mixed.of_modality("image").prompt(PLACEHOLDERS) == "<I><I>"
    assert mixed.of_modality("video").media == (companion("video", 1),)
    assert Case.from_json(mixed.to_json()) == mixed
    # a slot with no item (the errors check's n+1 placeholders) takes the case's modality
    extra = dataclasses.replace(mixed, segments=(*mixed.segments, ""))
    assert extra.prompt(PLACEHOLDERS) == "a<V> <I>b<I>c<I>"


class FakeSubject:
    """Each item gets a placeholder of its modality's length and a field holding its seed;
    `one_owner`: every field of a mixed prompt goes to its first modality (the fault)."""

    name = "fake"

    def __init__(self, modalities: tuple[str, ...], one_owner: bool = False):
        self.modalities, self.one_owner = modalities, one_owner
        # qwen2_vl's recipe takes images; a subject says it takes video too by its capability
        self.capabilities = frozenset({VIDEO} if "video" in modalities else ())

    def process(self, case: Case) -> ProcessedPrompt:
        ids: list[int] = []
        placeholders: dict[str, list] = {}
        fields: dict[str, list] = {}
        for text, item in zip(case.segments, case.media, strict=False):
            ids += [0] * len(text)
            length = LENGTHS[item.modality]
            placeholders.setdefault(item.modality, []).append(
                Placeholder(len(ids), length, tuple(range(len(ids), len(ids) + length))))
            ids += [1] * length
            owner = case.modalities[0] if self.one_owner else item.modality
            fields.setdefault(owner, []).append({f"{item.modality}_values":
                                                 torch.tensor([item.seed])})
        return ProcessedPrompt(tuple(ids), {m: tuple(p) for m, p in placeholders.items()},
                               fields)


def context(subject: FakeSubject) -> Context:
    return Context("qwen2_vl", "/nowhere", get_recipe("qwen2_vl"), subject, {})


def test_mixed_modalities_is_claimed_where_the_subject_takes_two():
    assert MIXED in claims(context(FakeSubject(("image", "video"))))
    assert MIXED not in claims(context(FakeSubject(("image",))))


@pytest.mark.parametrize("modality", ["image", "video"])
def test_a_field_given_to_the_wrong_modality_fails_the_mixed_comparison(modality):
    case = Case("qwen2_vl", modality, ("x", "", "y"),
                (companion(modality, 3), companion(modality, 4)))
    assert mixed_difference(context(FakeSubject(("image", "video"))), case) is None
    found = mixed_difference(context(FakeSubject(("image", "video"), one_owner=True)), case)
    other = "video" if modality == "image" else "image"
    assert found and found.startswith(f"mixed {other}+{modality} prompt: ")
    assert "(alone vs mixed)" in found


@pytest.mark.slow
def test_the_backend_fault_of_mixed_modalities_fails_slicing_on_vllm_0_32(tmp_path):
    if not vllms.releases()["0.32.0"].python.exists():
        pytest.skip("no vLLM 0.32.0 environment: python3 scripts/bootstrap.py env --vllm 0.32.0")
    out = tmp_path / "run"
    command = [sys.executable, "-m", "conformance", "run", "--vllm", "0.32.0", "--versions",
               "5.19.0", "--fixtures", "qwen2_vl", "--subjects", "vllm-backend", "--checks",
               "slicing", "--jobs", "1", "--output"]
    for folder, planted in ((out / "clean", []), (out / "fault",
                                                  ["--fault", "backend-fields-one-modality"])):
        subprocess.run([*command, str(folder), *planted], cwd=ROOT, capture_output=True,
                       timeout=1200)
    (clean,) = json.loads((out / "clean" / "results.json").read_text())["cells"]
    (faulty,) = json.loads((out / "fault" / "results.json").read_text())["cells"]
    assert clean["status"] == "pass" and MIXED in clean["data"]["exercised"], clean
    assert faulty["status"] == "fail" and "(alone vs mixed)" in Verdict.from_dict(faulty).detail, \
        faulty
    assert Path(out / "fault" / "report.md").exists()
