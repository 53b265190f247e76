"""The model checks' references (native vLLM, the HF model) and the attribution of a
difference to the side that deviates: pure functions, no model loaded."""

from __future__ import annotations

import pytest

from conformance.checks.model.generate import Decoded, logit_scale, strict_difference
from conformance.checks.model.references import (
    HF_PREFIX,
    REFERENCES,
    attribution,
    references_of,
    run_references,
    three_way,
)
from fixtures.registry import get_recipe


def test_every_checkpoint_has_the_hf_model_and_native_vllm_where_it_exists():
    assert references_of(get_recipe("llava")) == ("native", "hf")
    assert references_of(get_recipe("aya_vision")) == ("hf",)
    assert references_of(get_recipe("llava"), only=("hf",)) == ("hf",)


@pytest.mark.parametrize("subject_vs, between, side", [
    ({"native": True, "hf": True}, False, "subject"),
    ({"native": True, "hf": True}, True, "all"),
    ({"native": True, "hf": False}, True, "native"),
    ({"native": False, "hf": True}, True, "hf"),
    ({"native": False, "hf": False}, True, None),  # the subject agrees with both: nothing
    ({"hf": True}, None, None),  # one reference: nothing to attribute
])
def test_a_difference_is_attributed_to_the_side_that_deviates(subject_vs, between, side):
    assert attribution(subject_vs, between) == side


def numbers(expected: int, actual: int, ref: str, subject: str) -> list[str]:
    return [] if expected == actual else [f"{subject} {actual} vs {ref} {expected}"]


def test_three_way_words_each_reference_and_names_the_deviating_side():
    data: dict = {}
    found = three_way("backend", {"native": 1, "hf": 1}, 2, numbers, data)
    assert found == [
        "backend 2 vs native 1 [the backend deviates: native vLLM agrees with the HF model]",
        HF_PREFIX + "backend 2 vs hf 1 [the backend deviates: native vLLM agrees with the HF "
                    "model]"]
    assert data[REFERENCES] == {"backend vs native": "differs", "backend vs hf": "differs",
                                "native vs hf": "agree"}
    assert data["deviates"] == {"backend": "subject"}


def test_native_deviating_from_transformers_is_said_so():
    data: dict = {}
    (found,) = three_way("backend", {"native": 1, "hf": 2}, 2, numbers, data)
    assert found.startswith("backend 2 vs native 1 [native vLLM deviates from the HF model")
    assert data[REFERENCES]["native vs hf"] == "differ"


def test_without_native_the_hf_model_alone_is_the_reference():
    data: dict = {}
    assert three_way("backend", {"hf": 1}, 1, numbers, data) == []
    assert three_way("backend", {"hf": 1}, 3, numbers, data) == [HF_PREFIX + "backend 3 vs hf 1"]
    assert "deviates" not in data


def test_a_reference_that_raises_is_recorded_and_the_others_serve():
    def produce(ref: str) -> int:
        if ref == "native":
            raise RuntimeError("native cannot load it")
        return 7

    data: dict = {}
    assert run_references(("native", "hf"), produce, data) == {"hf": 7}
    assert data[REFERENCES]["native"] == "error: RuntimeError: native cannot load it"
    with pytest.raises(RuntimeError, match="native cannot load it"):
        run_references(("native",), produce, {})


def step(*logprobs: tuple[int, float]) -> dict[int, float]:
    return dict(logprobs)


def test_logits_scaled_by_one_factor_are_named_with_it():
    hf = step((3, -1.0), (5, -1.5), (7, -2.0))
    scaled = step((3, -1.2), (5, -1.2 - 0.5 * 0.0625), (7, -1.2 - 1.0 * 0.0625))
    assert logit_scale(hf, scaled, 3) == pytest.approx(0.0625)
    assert logit_scale(hf, hf, 3) is None  # the same logits: no factor
    assert logit_scale(hf, step((3, -1.0), (5, -1.6), (7, -2.0)), 3) is None  # no one factor
    difference, _ = strict_difference(Decoded((1,), (3,), (hf,)), Decoded((1,), (3,), (scaled,)),
                                      1e-4, "hf", "backend")
    assert difference is not None
    assert difference.startswith("step 0: logprob of token 7 hf -2.000000 vs backend -1.262500")
    assert difference.endswith("the backend's logit gaps are the hf's times 0.0625")


def test_a_small_logprob_drift_fails_the_fp32_bound_without_a_scale():
    hf = step((3, -1.0), (5, -1.5))
    drifted = step((3, -1.0 + 3e-4), (5, -1.5))
    difference, data = strict_difference(Decoded((1,), (3,), (hf,)),
                                         Decoded((1,), (3,), (drifted,)), 1e-4, "hf", "backend")
    assert difference == ("step 0: logprob of token 3 hf -1.000000 vs backend -0.999700 "
                          "(off by 3.00e-04, fp32 bound 0.0001)")
    assert data["hf_tokens"] == [3] and data["max_logprob_diff"] == pytest.approx(3e-4)


def test_several_prompts_relations_merge_so_any_difference_shows():
    from conformance.checks.model.references import merged_relations

    rows = [{"references": {"backend vs hf": "agrees", "native vs hf": "agree"}},
            {"references": {"backend vs hf": "differs", "native vs hf": "differ",
                            "native vs hf, first": "one"}},
            {"references": {"backend vs hf": "agrees", "native vs hf": "differ",
                            "native vs hf, first": "two"}},
            {}]
    assert merged_relations(rows) == {"backend vs hf": "differs", "native vs hf": "differ",
                                      "native vs hf, first": "one"}


@pytest.mark.parametrize("refs, word", [
    ({"backend vs native": "agrees", "backend vs hf": "agrees", "native vs hf": "agree"},
     "agree"),
    ({"backend vs hf": "agrees"}, "hf agrees"),
    ({"backend vs hf": "differs"}, "hf differs"),
    ({"backend vs native": "differs", "backend vs hf": "differs", "native vs hf": "agree"},
     "backend off"),
    ({"backend vs native": "differs", "backend vs hf": "differs", "native vs hf": "differ"},
     "all differ"),
    ({"backend vs native": "differs", "backend vs hf": "agrees", "native vs hf": "differ"},
     "native off"),
    ({"backend vs native": "agrees", "backend vs hf": "differs", "native vs hf": "differ"},
     "hf off"),
    ({"hf": "error: OSError: x", "backend vs native": "agrees"}, "native agrees"),
    ({"impl vs hf": "agrees"}, None),
])
def test_a_cell_says_in_a_word_which_references_agree(refs, word):
    from conformance.results.agreement import RELATIONS, markdown_section, relation
    from conformance.results.verdict import Verdict
    from conformance.results.view import View

    cell = Verdict("gemma3", "5.17.0", "generate", "pass", subject="vllm-backend",
                   data={REFERENCES: refs})
    assert relation(cell) == word
    assert word is None or word in RELATIONS
    impl = Verdict("gemma3", "5.17.0", "generate", "pass", subject="impl",
                   data={REFERENCES: refs})
    assert relation(impl) is None  # the views speak of the backend
    view = View([cell, impl])
    section = "\n".join(markdown_section(view.relations, view.columns))
    assert (f"| gemma3 | generate | {word} |" in section) == (word is not None)
