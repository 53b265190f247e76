"""impl's model side (encoder, M-RoPE) against the imported vLLM's own backend, under the
profile of that vLLM (`impl.release.profile_for(vllm.__version__)`).

The backend's `MultiModalMixin` methods run on a fake host holding a fake HF model, so every
shape of encoder output and every `get_rope_index` signature the backend tells apart is fed to
both. Passing on vLLM 0.31.0 and on 0.34.0 checks both sides of each release step; the
`*_tell_releases_apart` tests show the cases that do so give different results per profile.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from backend_compare import outcome
from transformers.modeling_outputs import BaseModelOutputWithPooling

from impl import encoder
from impl.mrope import Feature, mrope_input_positions
from impl.release import Profile, profile_for
from impl.types import placeholder_from_mask

pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm

OLDEST, NEWEST = profile_for("0.31.0"), profile_for("0.34.0")
HIDDEN = 3
ROWS_PER_PATCH = 2  # encoder rows per patch, so the split reads the output as an expansion


@pytest.fixture(scope="module")
def mm() -> Any:
    from vllm.model_executor.models.transformers import multimodal

    return multimodal


@pytest.fixture(scope="module")
def profile() -> Profile:
    import vllm

    return profile_for(vllm.__version__)


def backend_host(mm: Any, model: Any) -> Any:
    """An object whose methods are the backend mixin's own, with `model` as its HF model.
    Copied off the class unbound (`getattr_static`), so static methods stay static."""
    names = [name for name in dir(mm.MultiModalMixin)
             if name.startswith(("_process", "_get_features", "_get_image_features"))
             or name in ("_split_embeddings", "_select_item_kwargs", "check_version",
                         "embed_multimodal", "get_mrope_input_positions")]
    host_class = type("Host", (), {name: inspect.getattr_static(mm.MultiModalMixin, name)
                                   for name in names})
    host = host_class()
    host.model = model
    return host


def same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


# --- the encoder ---------------------------------------------------------------------------


class Encoder:
    """A fake HF model's `get_<modality>_features`.

    `layout`: the embeddings as one tensor ("tensor"), one entry per item ("item", cut by the
    grid), or one entry per batch row ("row": the batch is one row, whatever the items).
    `answer`: what comes back: the embeddings themselves ("bare"), a tuple led by them
    ("tuple"), a ModelOutput ("output"), or a ModelOutput only when asked `return_dict=True`
    and a tuple otherwise ("asked", as HF's models do).
    """

    def __init__(self, layout: str, answer: str) -> None:
        self.layout, self.answer = layout, answer
        self.calls: list[tuple[str, tuple[int, ...], dict[str, Any]]] = []

    def get_image_features(self, pixel_values: torch.Tensor, **kwargs: Any) -> Any:
        return self.features("image", pixel_values, kwargs)

    def get_video_features(self, pixel_values: torch.Tensor, **kwargs: Any) -> Any:
        return self.features("video", pixel_values, kwargs)

    def get_audio_features(self, features: torch.Tensor, **kwargs: Any) -> Any:
        self.calls.append(("audio", tuple(features.shape), kwargs))
        rows = torch.arange(features.shape[0] * 2 * HIDDEN, dtype=torch.float32)
        return BaseModelOutputWithPooling(pooler_output=rows.reshape(-1, 2, HIDDEN))

    def features(self, modality: str, pixels: torch.Tensor, kwargs: dict[str, Any]) -> Any:
        self.calls.append((modality, tuple(pixels.shape), kwargs))
        rows = pixels.numel() * ROWS_PER_PATCH  # one value a patch
        embeddings: Any = torch.arange(rows * HIDDEN, dtype=torch.float32).reshape(rows, HIDDEN)
        embeddings = embeddings + 100 * float(pixels.sum())  # items' outputs tell apart
        if self.layout == "item":
            grid = kwargs[f"{modality}_grid_thw"]
            sizes = (grid.prod(-1) * ROWS_PER_PATCH).tolist()
            embeddings = tuple(torch.split(embeddings, sizes))
        elif self.layout == "row":
            embeddings = (embeddings,)
        if self.answer == "tuple" or (self.answer == "asked" and not kwargs.get("return_dict")):
            return (embeddings, None)
        if self.answer in ("output", "asked"):
            return BaseModelOutputWithPooling(pooler_output=embeddings)
        return embeddings


def pixels(num_patches: int, start: int = 0) -> torch.Tensor:
    return torch.arange(start, start + num_patches, dtype=torch.float32).reshape(-1, 1)


def grid(*patches: int) -> torch.Tensor:
    return torch.tensor([[1, 1, n] for n in patches])


def encoder_inputs() -> dict[str, dict[str, Any]]:
    """One modality's batched fields, as the model runner passes them."""
    return {
        "images": dict(pixel_values=pixels(4), num_image_patches=torch.tensor([1, 2, 1]),
                       image_grid_thw=grid(1, 2, 1)),
        "image list": dict(pixel_values=[pixels(2), pixels(3, 5)],
                           num_image_patches=torch.tensor([2, 3]), image_grid_thw=grid(2, 3)),
        "image embeds": dict(image_embeds=torch.ones(5, HIDDEN)),
        "videos": dict(pixel_values_videos=pixels(6), num_video_patches=torch.tensor([4, 2]),
                       video_grid_thw=grid(4, 2), second_per_grid_ts=torch.tensor([0.5, 1.0])),
        "video list": dict(pixel_values_videos=[pixels(3), pixels(1, 7)],
                           num_video_patches=torch.tensor([3, 1]), video_grid_thw=grid(3, 1),
                           second_per_grid_ts=torch.tensor([2.0, 2.0])),
        "audios": dict(input_features=torch.zeros(2, 5), num_audio_tokens=torch.tensor([2, 2]),
                       feature_attention_mask=torch.ones(2, 5)),
    }


LAYOUTS = ("tensor", "item", "row")
ANSWERS = ("bare", "tuple", "output", "asked")


def embed_both(mm: Any, profile: Profile, layout: str, answer: str, inputs: dict[str, Any]):
    theirs_model, mine_model = Encoder(layout, answer), Encoder(layout, answer)
    host = backend_host(mm, theirs_model)
    theirs = outcome(lambda: host.embed_multimodal(**inputs))
    mine = outcome(lambda: encoder.embed_multimodal(mine_model, profile=profile, **inputs))
    return (theirs, theirs_model.calls), (mine, mine_model.calls)


@pytest.mark.parametrize("answer", ANSWERS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", list(encoder_inputs()))
def test_embed_multimodal(mm: Any, profile: Profile, case: str, layout: str,
                          answer: str) -> None:
    inputs = encoder_inputs()[case]
    (theirs, their_calls), (mine, my_calls) = embed_both(mm, profile, layout, answer, inputs)
    assert same(theirs, mine), f"{case}: backend {theirs!r} vs impl {mine!r}"
    assert same(their_calls, my_calls), "the encoder was called differently"


def test_embed_cases_tell_releases_apart() -> None:
    """Each encoder step has a case above whose result differs between 0.31.0's and 0.34.0's
    profile (a 0.32.0-only difference, BATCH_ROWS, is 0.32.0 against 0.33.0)."""

    def run(profile: Profile, case: str, layout: str, answer: str) -> Any:
        model = Encoder(layout, answer)
        result = outcome(lambda: encoder.embed_multimodal(
            model, profile=profile, **encoder_inputs()[case]))
        return result, model.calls

    differs = [
        ("images", "tensor", "bare"),   # FEATURES_DICT: a bare tensor has no pooler_output
        ("images", "tensor", "tuple"),  # FEATURES_DICT: nor has a tuple
        ("images", "item", "asked"),    # FEATURES_DICT: return_dict=True reaches the model
        ("videos", "tensor", "output"),  # VIDEO: video pixels are encoded at all
        ("videos", "row", "output"),    # VIDEO + BATCH_ROWS
    ]
    for case, layout, answer in differs:
        assert not same(run(OLDEST, case, layout, answer), run(NEWEST, case, layout, answer)), case
    v032, v033 = profile_for("0.32.0"), profile_for("0.33.0")
    for case in ("images", "videos"):
        assert not same(run(v032, case, "row", "output"), run(v033, case, "row", "output"))
        assert same(run(v032, case, "item", "output"), run(v033, case, "item", "output"))


# --- M-RoPE --------------------------------------------------------------------------------


class StrictRope:
    """`get_rope_index` with named parameters only (no video)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def get_rope_index(self, input_ids, image_grid_thw=None, mm_token_type_ids=None):
        return self.positions(input_ids=input_ids, image_grid_thw=image_grid_thw,
                              mm_token_type_ids=mm_token_type_ids)

    def positions(self, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        self.calls.append(kwargs)
        n = kwargs["input_ids"].shape[1]
        types = kwargs.get("mm_token_type_ids")
        types = torch.zeros(n, dtype=torch.int) if types is None else types[0]
        shift = sum(float(v.sum()) for k, v in kwargs.items()
                    if k.endswith(("_thw", "_ts")) and v is not None)
        positions = (torch.arange(n) * (types + 1) + int(shift)).expand(3, 1, n)
        return positions, torch.tensor([[int(types.sum()) - n]])


class VideoRope(StrictRope):
    def get_rope_index(self, input_ids, image_grid_thw=None, video_grid_thw=None,
                       second_per_grid_ts=None, mm_token_type_ids=None):
        return self.positions(input_ids=input_ids, image_grid_thw=image_grid_thw,
                              video_grid_thw=video_grid_thw,
                              second_per_grid_ts=second_per_grid_ts,
                              mm_token_type_ids=mm_token_type_ids)


class OpenRope(StrictRope):
    def get_rope_index(self, input_ids, **kwargs):
        return self.positions(input_ids=input_ids, **kwargs)


@dataclass(frozen=True)
class Item:
    modality: str
    offset: int
    length: int
    mask: tuple[bool, ...] | None  # the PlaceholderRange's is_embed (None: every position)
    fields: dict[str, torch.Tensor]


def image(offset: int, length: int, mask: tuple[bool, ...] | None = None) -> Item:
    return Item("image", offset, length, mask, {"image_grid_thw": torch.tensor([1, 1, length])})


def video(offset: int, length: int, mask: tuple[bool, ...] | None = None,
          seconds: float = 0.5) -> Item:
    return Item("video", offset, length, mask, {"video_grid_thw": torch.tensor([2, 1, length]),
                                                 "second_per_grid_ts": torch.tensor(seconds)})


MROPE_CASES: dict[str, list[Item]] = {
    "text only": [],
    "whole images": [image(1, 3), image(6, 2)],
    "masked images": [image(1, 4, (False, True, True, False)), image(7, 2, (True, False))],
    "an image without embeddings": [image(2, 2, (False, False))],
    "videos and an image": [video(0, 3, (True, True, False), seconds=2.0), image(4, 2),
                            video(7, 2)],
    "audio lengths": [Item("audio", 1, 2, None, {"audio_feature_lengths": torch.tensor(4)})],
    "audio in video off": [Item("video", 1, 2, None,
                                {"video_grid_thw": torch.tensor([1, 1, 2]),
                                 "use_audio_in_video": torch.tensor(False)})],
}
NUM_TOKENS = 10


def specs_of(items: list[Item]) -> list[Any]:
    from vllm.multimodal.inputs import (
        MultiModalBatchedField,
        MultiModalFeatureSpec,
        MultiModalFieldElem,
        MultiModalKwargsItem,
        PlaceholderRange,
    )

    return [
        MultiModalFeatureSpec(
            data=MultiModalKwargsItem({
                key: MultiModalFieldElem(data=value, field=MultiModalBatchedField())
                for key, value in item.fields.items()
            }),
            modality=item.modality,
            identifier=f"{item.modality}-{index}",
            mm_position=PlaceholderRange(
                offset=item.offset, length=item.length,
                is_embed=None if item.mask is None else torch.tensor(item.mask)),
        )
        for index, item in enumerate(items)
    ]


def features_of(items: list[Item]) -> list[Feature]:
    return [
        Feature(item.modality,
                placeholder_from_mask(item.offset, None if item.mask is None else list(item.mask),
                                      item.length),
                item.fields)
        for item in items
    ]


ROPES = {"strict": StrictRope, "video": VideoRope, "open": OpenRope}


def impl_positions(rope: str, case: str, profile: Profile) -> tuple[Any, list[dict[str, Any]]]:
    model = ROPES[rope]()
    result = outcome(lambda: mrope_input_positions(
        model, list(range(NUM_TOKENS)), features_of(MROPE_CASES[case]), profile=profile))
    return result, model.calls


@pytest.mark.parametrize("rope", list(ROPES))
@pytest.mark.parametrize("case", list(MROPE_CASES))
def test_mrope(mm: Any, profile: Profile, case: str, rope: str) -> None:
    model = ROPES[rope]()
    host = backend_host(mm, model)
    theirs = outcome(lambda: host.get_mrope_input_positions(
        list(range(NUM_TOKENS)), specs_of(MROPE_CASES[case])))
    mine, my_calls = impl_positions(rope, case, profile)
    assert same(theirs, mine), f"{case}: backend {theirs!r} vs impl {mine!r}"
    assert same(model.calls, my_calls), "get_rope_index was called differently"


def test_mrope_cases_tell_releases_apart() -> None:
    """MROPE_EMBED_TYPES changes the result of each of these cases."""
    differs = [
        ("masked images", "strict"),  # token types only at embedding positions
        ("an image without embeddings", "open"),
        ("videos and an image", "video"),  # video grids and timing reach the model
        ("videos and an image", "open"),
        ("text only", "open"),  # `second_per_grid_ts=None` is passed to an open signature
    ]
    for case, rope in differs:
        assert not same(impl_positions(rope, case, OLDEST),
                        impl_positions(rope, case, NEWEST)), (case, rope)
    for case in ("audio lengths", "audio in video off"):
        assert impl_positions("open", case, NEWEST)[0] is NotImplementedError
