"""Running the imported vLLM's backend processor and impl on the same prompt, and comparing
what they give: prompt ids, placeholders (offset, length, embedding positions) and each item's
fields, or the exception type both raise. Shared by the suites that hold impl to the backend
(test_equivalence_vllm.py, test_release_processing.py, test_release_options.py)."""

from __future__ import annotations

from typing import Any

import torch

import impl


def as_tuple(placeholder: Any) -> tuple[int, int, tuple[int, ...]]:
    return placeholder.offset, placeholder.length, tuple(placeholder.embed_positions)


def run_backend(processor: Any, prompt: str | list[int], mm_data: dict) -> tuple:
    from conformance.subjects.vllm import placeholder_from_range

    out = processor(prompt, processor.info.parse_mm_data(mm_data, validate=False))
    placeholders = {
        modality: tuple(
            as_tuple(placeholder_from_range(r.offset, r.length, r.is_embed)) for r in ranges
        )
        for modality, ranges in out["mm_placeholders"].items()
    }
    items = {
        modality: [{key: elem.data for key, elem in item.items()} for item in modality_items]
        for modality, modality_items in out["mm_kwargs"].items()
    }
    return list(out["prompt_token_ids"]), placeholders, items


def run_impl(processor: Any, prompt: str | list[int], mm_data: dict, **kwargs: Any) -> tuple:
    result = impl.process(processor, prompt, mm_data, **kwargs)
    placeholders = {m: tuple(as_tuple(p) for p in ps) for m, ps in result.placeholders.items()}
    return list(result.prompt_ids), placeholders, result.item_fields


def same_value(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and torch.equal(a, b)
        )
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def assert_same(expected: tuple, actual: tuple) -> None:
    assert actual[0] == expected[0], "prompt ids differ"
    assert actual[1] == expected[1], "placeholders differ"
    assert set(actual[2]) == set(expected[2])
    for modality, items in expected[2].items():
        assert len(actual[2][modality]) == len(items)
        for theirs, mine in zip(items, actual[2][modality], strict=True):
            assert set(mine) == set(theirs), f"{modality} field names differ"
            for key in theirs:
                assert same_value(theirs[key], mine[key]), f"{modality}.{key} differs"


def outcome(run: Any) -> Any:
    """`run()`'s result, or the type of the exception it raised: the type is what has to
    match between the backend and impl."""
    try:
        return run()
    except Exception as error:  # noqa: BLE001 - the exception type is the result
        return type(error)


def assert_same_outcome(expected: Any, actual: Any) -> None:
    if isinstance(expected, type):
        assert actual is expected, f"backend raised {expected.__name__}, impl gave {actual}"
    else:
        assert not isinstance(actual, type), f"impl raised {actual.__name__}"
        assert_same(expected, actual)


def transformers_version() -> str:
    import transformers

    return transformers.__version__


def every_fixture() -> list[str]:
    from fixtures.registry import available_recipes

    return list(available_recipes())
