import pytest
import torch

from impl.mrope import Feature, features_of, mrope_input_positions, token_type_ids
from impl.release import profile_for
from impl.types import Placeholder, ProcessedPrompt


def feature(modality: str, offset: int, length: int, **fields) -> Feature:
    return Feature(modality, Placeholder(offset, length, tuple(range(offset, offset + length))),
                   fields)


class StrictModel:
    def __init__(self) -> None:
        self.kwargs = {}

    def get_rope_index(self, input_ids, image_grid_thw=None, mm_token_type_ids=None):
        self.kwargs = dict(input_ids=input_ids, image_grid_thw=image_grid_thw,
                           mm_token_type_ids=mm_token_type_ids)
        n = input_ids.shape[1]
        return torch.arange(n).expand(3, 1, n), torch.tensor([[5]])


class OpenModel(StrictModel):
    def get_rope_index(self, input_ids, **kwargs):
        self.kwargs = dict(input_ids=input_ids, **kwargs)
        n = input_ids.shape[1]
        return torch.arange(n).expand(3, 1, n), torch.tensor([[-2]])


def test_positions_and_kwargs_for_a_strict_signature() -> None:
    model = StrictModel()
    grid = torch.tensor([1, 2, 2])
    features = [feature("image", 1, 4, image_grid_thw=grid)]
    positions, delta = mrope_input_positions(model, [0, 9, 9, 9, 9, 0], features)
    assert positions.shape == (3, 6) and delta == 5
    assert model.kwargs["image_grid_thw"].tolist() == [[1, 2, 2]]
    assert model.kwargs["mm_token_type_ids"].tolist() == [[0, 1, 1, 1, 1, 0]]
    assert "video_grid_thw" not in model.kwargs  # not accepted and nothing to pass


def test_open_signature_gets_empty_video_grid() -> None:
    model = OpenModel()
    _, delta = mrope_input_positions(model, [1, 2, 3], [feature("audio", 0, 2)])
    assert delta == -2
    assert model.kwargs["image_grid_thw"] is None and model.kwargs["video_grid_thw"] is None
    assert model.kwargs["mm_token_type_ids"].tolist() == [[3, 3, 0]]


@pytest.mark.parametrize(
    "fields",
    [
        {"video_grid_thw": torch.ones(3)},
        {"second_per_grid_ts": torch.ones(1)},
        {"audio_feature_lengths": torch.ones(1)},
        {"use_audio_in_video": torch.tensor(True)},
    ],
)
def test_video_and_audio_in_video_are_not_supported(fields) -> None:
    with pytest.raises(NotImplementedError):
        mrope_input_positions(OpenModel(), [1, 2], [feature("image", 0, 1, **fields)])


def test_token_type_ids() -> None:
    types = token_type_ids(6, [feature("image", 0, 2), feature("video", 3, 1),
                              feature("audio", 5, 1)])
    assert types.tolist() == [[1, 1, 0, 2, 0, 3]] and types.dtype == torch.int


def test_features_in_prompt_order() -> None:
    prompt = ProcessedPrompt(
        prompt_ids=(0,) * 10,
        placeholders={
            "image": (Placeholder(6, 2, (6, 7)),),
            "audio": (Placeholder(1, 1, (1,)), Placeholder(8, 1, (8,))),
        },
        item_fields={"image": [{"g": 0}], "audio": [{"a": 0}, {"a": 1}]},
    )
    order = [(f.modality, f.placeholder.offset) for f in features_of(prompt)]
    assert order == [("audio", 1), ("image", 6), ("audio", 8)]


# --- later releases (impl.release profiles) ------------------------------------------------

V032 = profile_for("0.32.0")


def masked(modality: str, offset: int, length: int, embeds: tuple[int, ...], **fields) -> Feature:
    return Feature(modality, Placeholder(offset, length, embeds), fields)


def test_token_types_only_at_embed_positions_since_embed_types() -> None:
    features = [masked("image", 1, 4, (2, 3)), masked("video", 5, 2, ()),
                feature("audio", 7, 1)]
    assert token_type_ids(8, features).tolist() == [[0, 1, 1, 1, 1, 2, 2, 3]]
    assert token_type_ids(8, features, profile=V032).tolist() == [[0, 0, 1, 1, 0, 0, 0, 3]]


def test_video_grids_and_timing_reach_the_model_since_embed_types() -> None:
    model = OpenModel()
    features = [
        feature("video", 0, 2, video_grid_thw=torch.tensor([2, 1, 1]),
                second_per_grid_ts=torch.tensor(0.5)),
        feature("image", 2, 1, image_grid_thw=torch.tensor([1, 1, 1])),
        feature("video", 3, 1, video_grid_thw=torch.tensor([1, 1, 1]),
                second_per_grid_ts=torch.tensor(2.0)),
    ]
    with pytest.raises(NotImplementedError):
        mrope_input_positions(model, [0] * 4, features)
    mrope_input_positions(model, [0] * 4, features, profile=V032)
    assert model.kwargs["video_grid_thw"].tolist() == [[2, 1, 1], [1, 1, 1]]
    assert model.kwargs["second_per_grid_ts"].tolist() == [0.5, 2.0]
    assert model.kwargs["image_grid_thw"].tolist() == [[1, 1, 1]]
    assert model.kwargs["mm_token_type_ids"].tolist() == [[2, 2, 1, 2]]


def test_open_signature_gets_empty_timing_since_embed_types() -> None:
    model = OpenModel()
    mrope_input_positions(model, [1, 2], [feature("image", 0, 1)])
    assert "second_per_grid_ts" not in model.kwargs
    mrope_input_positions(model, [1, 2], [feature("image", 0, 1)], profile=V032)
    assert model.kwargs["second_per_grid_ts"] is None


def test_strict_signature_is_not_given_timing() -> None:
    model = StrictModel()
    mrope_input_positions(model, [1, 2], [feature("image", 0, 1)], profile=V032)
    assert set(model.kwargs) == {"input_ids", "image_grid_thw", "mm_token_type_ids"}


@pytest.mark.parametrize(
    "fields",
    [{"audio_feature_lengths": torch.ones(1)}, {"use_audio_in_video": torch.tensor(False)}],
)
def test_audio_fields_are_still_refused(fields) -> None:
    with pytest.raises(NotImplementedError, match="audio"):
        mrope_input_positions(OpenModel(), [1, 2], [feature("audio", 0, 1, **fields)],
                              profile=V032)
