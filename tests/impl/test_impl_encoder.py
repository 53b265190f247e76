import logging
from typing import Any

import pytest
import torch
import transformers
from transformers.modeling_outputs import BaseModelOutputWithPooling

from impl import encoder
from impl.release import profile_for
from impl.version import at_least

# the backend refuses audio below transformers 5.13.0, and impl with it
needs_audio_support = pytest.mark.skipif(
    not at_least(transformers.__version__, "5.13.0"),
    reason="audio support needs transformers>=5.13.0 (as in the backend)")


def rows(n: int, width: int = 2) -> torch.Tensor:
    return torch.arange(n * width, dtype=torch.float32).reshape(n, width)


def test_split_exact() -> None:
    parts = encoder.split_embeddings(rows(5), [2, 3])
    assert [p.shape[0] for p in parts] == [2, 3]


def test_split_flattens_leading_dimensions() -> None:
    parts = encoder.split_embeddings(rows(6).reshape(2, 3, 2), [1, 5])
    assert [p.shape for p in parts] == [(1, 2), (5, 2)]


def test_split_uniform_expansion() -> None:
    parts = encoder.split_embeddings(rows(10), [2, 3])
    assert [p.shape[0] for p in parts] == [4, 6]


def test_split_fallback_pads_by_repeating(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="impl.encoder"):
        parts = encoder.split_embeddings(rows(3), [4, 3])
    assert "padding or truncating" in caplog.text
    assert [p.shape[0] for p in parts] == [4, 3]
    assert torch.equal(torch.cat(parts), torch.cat([rows(3)] * 3)[:7])


def test_split_fallback_truncates() -> None:
    parts = encoder.split_embeddings(rows(7), [2, 3])
    assert torch.equal(torch.cat(parts), rows(5))


def test_split_of_empty_output() -> None:
    # 0 rows divide evenly by any total, so this is read as an expansion to zero rows per
    # token; the reference's "empty embeddings" error sits behind that branch and never fires
    parts = encoder.split_embeddings(rows(0), [2, 1])
    assert [p.shape for p in parts] == [(0, 2), (0, 2)]


def test_nothing_expected() -> None:
    assert encoder.split_embeddings(rows(4), []) == []
    assert encoder.split_embeddings(rows(4), [0, 0]) == []


def test_unwrap_features() -> None:
    tensor = rows(2)
    assert encoder.unwrap_features((tensor, "attn")) is tensor
    assert encoder.unwrap_features(BaseModelOutputWithPooling(pooler_output=tensor)) is tensor
    assert encoder.unwrap_features(tensor) is tensor


def test_select_item_kwargs() -> None:
    kwargs = {"grid": torch.tensor([[1], [2]]), "names": ["a", "b"], "flag": True, "x": [1]}
    picked = encoder.select_item_kwargs(kwargs, 1, 2)
    assert picked["grid"].tolist() == [[2]] and picked["names"] == ["b"]
    assert picked["flag"] is True and picked["x"] == [1]


class Vision(torch.nn.Module):
    pass


class FakeModel(torch.nn.Module):
    def __init__(self, per_image: int = 2) -> None:
        super().__init__()
        self.per_image = per_image
        self.image_calls: list[tuple[torch.Size, dict[str, Any]]] = []
        self.audio_calls: list[tuple[torch.Size, dict[str, Any]]] = []

    def get_encoder(self, modality: str | None = None) -> torch.nn.Module:
        if modality == "image":
            return Vision()
        if modality == "audio":
            raise ValueError("no audio encoder")
        return self

    def get_image_features(self, pixel_values: torch.Tensor, **kwargs: Any) -> Any:
        self.image_calls.append((pixel_values.shape, kwargs))
        n = pixel_values.shape[0] * self.per_image
        return BaseModelOutputWithPooling(pooler_output=torch.ones(n, 4))

    def get_audio_features(self, features: torch.Tensor, return_dict: bool, **kwargs: Any):
        assert return_dict
        self.audio_calls.append((features.shape, kwargs))
        return BaseModelOutputWithPooling(pooler_output=torch.ones(features.shape[0], 3, 4))


def test_find_encoder_classes() -> None:
    assert encoder.find_encoder_classes(FakeModel()) == {"image": Vision}


def test_embed_images_batched() -> None:
    model = FakeModel()
    out = encoder.embed_images(
        model, pixel_values=torch.zeros(3, 1), num_image_patches=torch.tensor([1, 2]),
        image_grid_thw=torch.ones(2, 3),
    )
    assert [e.shape for e in out] == [(2, 4), (4, 4)]
    (shape, kwargs), = model.image_calls
    assert set(kwargs) == {"image_grid_thw"}  # counts are consumed, grids passed on


def test_embed_images_one_by_one_for_lists() -> None:
    model = FakeModel(per_image=3)
    out = encoder.embed_images(
        model,
        pixel_values=[torch.zeros(2, 2), torch.zeros(5, 5)],
        num_image_patches=torch.tensor([1, 1]),
        image_sizes=torch.tensor([[2, 2], [5, 5]]),
    )
    assert [e.shape for e in out] == [(3, 4), (3, 4)]
    assert [shape for shape, _ in model.image_calls] == [(1, 2, 2), (1, 5, 5)]
    assert model.image_calls[1][1]["image_sizes"].tolist() == [[5, 5]]


def test_embed_images_passthrough_and_absence() -> None:
    embeds = torch.ones(3, 4)
    assert encoder.embed_images(FakeModel(), image_embeds=embeds)[0] is embeds
    assert encoder.embed_images(FakeModel(), input_features=torch.ones(1)) is None


def test_embed_images_from_patches_returning_a_list() -> None:
    class ListModel(FakeModel):
        def get_image_features(self, pixel_values, **kwargs):
            return ([torch.ones(2, 4), torch.ones(1, 4)],)

    out = encoder.embed_images(
        ListModel(), image_patches=torch.zeros(3, 1), num_image_patches=torch.tensor([2, 1])
    )
    assert [e.shape for e in out] == [(2, 4), (1, 4)]


@needs_audio_support
def test_embed_audios() -> None:
    model = FakeModel()
    out = encoder.embed_audios(
        model,
        input_features=torch.zeros(2, 8),
        num_audio_tokens=torch.tensor([3, 3]),
        mm_token_type_ids=torch.zeros(1),
        feature_attention_mask=torch.ones(2, 8),
    )
    assert [e.shape for e in out] == [(3, 4), (3, 4)]
    (_, kwargs), = model.audio_calls
    assert set(kwargs) == {"feature_attention_mask"}


@needs_audio_support
def test_embed_audios_one_by_one_for_lists() -> None:
    model = FakeModel()
    out = encoder.embed_audios(
        model,
        input_values=[torch.zeros(4), torch.zeros(9)],
        num_audio_tokens=torch.tensor([3, 2]),
    )
    assert [e.shape[0] for e in out] == [3, 2]  # the second is truncated to its token count
    assert [shape for shape, _ in model.audio_calls] == [(1, 4), (1, 9)]


@needs_audio_support
def test_embed_multimodal_dispatches_on_field_names() -> None:
    model = FakeModel()
    images = encoder.embed_multimodal(
        model, pixel_values=torch.zeros(1, 1), num_image_patches=torch.tensor([1])
    )
    audios = encoder.embed_multimodal(
        model, input_features=torch.zeros(1, 2), num_audio_tokens=torch.tensor([3])
    )
    assert len(images) == 1 and len(audios) == 1
    assert encoder.embed_multimodal(model) == []


def test_audio_needs_recent_transformers(monkeypatch: pytest.MonkeyPatch) -> None:
    import transformers

    monkeypatch.setattr(transformers, "__version__", "5.12.0")
    with pytest.raises(ImportError, match="5.13.0"):
        encoder.embed_audios(FakeModel(), input_features=torch.zeros(1, 2))


def test_cpu_tensors_follow_the_pixels() -> None:
    moved = encoder.to_device({"grid": torch.ones(1), "n": 3}, torch.device("meta"))
    assert moved["grid"].device.type == "meta" and moved["n"] == 3


# --- later releases (impl.release profiles) ------------------------------------------------

V032, V033 = profile_for("0.32.0"), profile_for("0.33.0")


class DictModel(FakeModel):
    """An encoder answering `return_dict=True` with a ModelOutput, for images and videos;
    `per_row` makes `pooler_output` a tuple of one entry per batch row of `per_row` items."""

    def __init__(self, per_image: int = 2, per_row: int | None = None) -> None:
        super().__init__(per_image)
        self.per_row = per_row
        self.video_calls: list[tuple[torch.Size, dict[str, Any]]] = []

    def output(self, pixel_values: torch.Tensor) -> BaseModelOutputWithPooling:
        n = pixel_values.shape[0] * self.per_image
        pooled: Any = torch.arange(n * 4, dtype=torch.float32).reshape(n, 4)
        if self.per_row is not None:
            pooled = tuple(torch.split(pooled, self.per_row * self.per_image))
        return BaseModelOutputWithPooling(pooler_output=pooled)

    def get_image_features(self, pixel_values: torch.Tensor, **kwargs: Any) -> Any:
        self.image_calls.append((pixel_values.shape, kwargs))
        return self.output(pixel_values)

    def get_video_features(self, pixel_values: torch.Tensor, **kwargs: Any) -> Any:
        self.video_calls.append((pixel_values.shape, kwargs))
        return self.output(pixel_values)


def test_features_dict_asks_for_a_model_output() -> None:
    model = DictModel()
    encoder.embed_images(model, profile=V032, pixel_values=torch.zeros(2, 1),
                         num_image_patches=torch.tensor([1, 1]))
    assert model.image_calls[0][1] == {"return_dict": True}


def test_features_dict_takes_pooler_output_only() -> None:
    class TupleModel(FakeModel):
        def get_image_features(self, pixel_values, **kwargs):
            return (torch.ones(2, 4), "attentions")

    kwargs = dict(pixel_values=torch.zeros(1, 1), num_image_patches=torch.tensor([2]))
    assert [e.shape for e in encoder.embed_images(TupleModel(), **kwargs)] == [(2, 4)]
    with pytest.raises(AttributeError):  # a tuple has no pooler_output
        encoder.embed_images(TupleModel(), profile=V032, **kwargs)


def video_kwargs(**extra: Any) -> dict[str, Any]:
    return dict(
        pixel_values_videos=torch.zeros(3, 1),
        num_video_patches=torch.tensor([1, 2]),
        video_grid_thw=torch.ones(2, 3, dtype=torch.long),
        second_per_grid_ts=torch.tensor([1.0, 0.5]),
        **extra,
    )


def test_videos_are_encoded_since_the_video_step() -> None:
    assert encoder.embed_multimodal(DictModel(), **video_kwargs()) == []
    model = DictModel()
    out = encoder.embed_multimodal(model, profile=V032, **video_kwargs())
    assert [e.shape for e in out] == [(2, 4), (4, 4)]
    (shape, kwargs), = model.video_calls
    assert shape == (3, 1) and not model.image_calls
    # the patch counts and the timing are consumed; the grid goes to the encoder
    assert set(kwargs) == {"video_grid_thw", "return_dict"}


def test_videos_one_by_one_for_lists() -> None:
    model = DictModel(per_image=3)
    out = encoder.embed_videos(
        model, profile=V032,
        pixel_values_videos=[torch.zeros(2, 2), torch.zeros(4, 2)],
        num_video_patches=torch.tensor([1, 1]),
        video_grid_thw=torch.tensor([[1, 1, 2], [2, 1, 2]]),
    )
    assert [e.shape for e in out] == [(3, 4), (3, 4)]
    assert [call[1]["video_grid_thw"].tolist() for call in model.video_calls] == [
        [[1, 1, 2]], [[2, 1, 2]]]


def test_no_video_pixels_no_video_embeddings() -> None:
    assert encoder.embed_videos(DictModel(), profile=V032, video_grid_thw=torch.ones(1)) is None


@pytest.mark.parametrize("modality", ["image", "video"])
def test_entries_per_batch_row_are_cut_per_item_since_batch_rows(modality: str) -> None:
    key = "pixel_values" if modality == "image" else "pixel_values_videos"
    kwargs = {key: torch.zeros(4, 1), f"num_{modality}_patches": torch.tensor([1, 3])}
    # one entry of 8 rows for the 4 patches of both items
    before = encoder.embed_multimodal(DictModel(per_row=4), profile=V032, **kwargs)
    after = encoder.embed_multimodal(DictModel(per_row=4), profile=V033, **kwargs)
    assert [e.shape for e in before] == [(8, 4)]
    assert [e.shape for e in after] == [(2, 4), (6, 4)]
    assert torch.equal(torch.cat(after), before[0])


def test_entries_per_item_are_kept_whole() -> None:
    kwargs = dict(pixel_values=torch.zeros(2, 1), num_image_patches=torch.tensor([1, 1]))
    for profile in (V032, V033):
        out = encoder.embed_images(DictModel(per_row=1), profile=profile, **kwargs)
        assert [e.shape for e in out] == [(2, 4), (2, 4)]
