"""impl's processing under the 0.32.0+ profile: video, and what the default profile keeps."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from impl_fakes import FakeProcessor, FakeVideoProcessor, make_image, make_video

import impl
from impl import budget, dummy, fields, info, offsets, video
from impl.release import DEFAULT, profile_for

NEW = profile_for("0.34.0")
TF = "5.22.2"  # a transformers that counts video


@pytest.fixture(autouse=True)
def video_counting_transformers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The video gate reads the installed transformers: pin one that counts video."""
    monkeypatch.setattr(info, "installed_transformers", lambda: TF)


def test_video_is_served_only_where_the_backend_serves_it() -> None:
    processor = FakeVideoProcessor()
    assert info.supported_modalities(processor) == ["image"]  # 0.31.0: never
    assert info.supported_modalities(processor, profile=NEW) == ["image", "video"]
    assert not info.is_video_model(processor, profile=NEW, transformers_version="5.17.0")
    assert info.is_video_model(processor, profile=NEW, transformers_version="5.18.0")
    assert not info.is_video_model(FakeVideoProcessor(counts=None), profile=NEW)
    assert not info.is_video_model(FakeVideoProcessor(counts=False), profile=NEW)
    assert not info.is_video_model(FakeProcessor(), profile=NEW)


def test_video_gate_asks_one_smallest_video_with_the_model_options() -> None:
    seen = []

    class Counting(FakeVideoProcessor):
        def _get_num_multimodal_tokens(self, image_sizes=None, video_sizes=None, **kwargs):
            seen.append((video_sizes, kwargs))
            return super()._get_num_multimodal_tokens(image_sizes, video_sizes, **kwargs)

    assert info.is_video_model(Counting(), {"fps": 1}, profile=NEW)
    assert seen == [(([2, 224, 224],), {"fps": 1})]  # temporal_patch_size frames


def test_no_modality_error_names_video_under_the_new_profile() -> None:
    with pytest.raises(ValueError, match="no image, video or audio processor"):
        info.supported_modalities(SimpleNamespace(), profile=NEW)
    with pytest.raises(ValueError, match="no image processor and no audio processor"):
        info.supported_modalities(SimpleNamespace())


def test_image_budget_follows_the_profile() -> None:
    processor = FakeVideoProcessor()
    processor.image_processor.size = {"height": 30, "width": 40}
    # 0.31.0: the huge image; from 0.32.0 the candidate ties on nothing: the fake's count
    # grows with the area, so the fallback wins, then halving holds no count
    assert info.largest_image_size(processor) == (10_000, 10_000)
    assert info.largest_image_size(processor, profile=NEW) == (10_000, 10_000)

    class Capped(FakeProcessor):
        def image_tokens(self, height: int, width: int) -> int:
            return min(height * width, 1200) // 100

    capped = Capped()
    capped.image_processor.size = {"height": 30, "width": 40}
    assert info.largest_image_size(capped, profile=NEW) == (40, 30)
    assert info.max_image_tokens(capped, profile=NEW) == 12 + 2
    del capped.image_processor.size  # no candidate: the fallback, halved while it holds
    assert info.largest_image_size(capped, profile=NEW) == (312, 312)


def test_max_tokens_per_item_with_video() -> None:
    processor = FakeVideoProcessor()
    config = SimpleNamespace()
    with pytest.raises(ValueError, match="seq_len"):
        info.max_tokens_per_item(processor, config, profile=NEW)
    # frames resized to 112x112 at most: 16 patches a frame pair
    result = info.max_tokens_per_item(processor, config, seq_len=10**6,
                                      mm_counts={"video": 1}, profile=NEW)
    assert result["video"] == 8 * 16  # 16 frames: 8 temporal patches
    small = info.max_tokens_per_item(processor, config, seq_len=2 * 16 * 2,
                                     mm_counts={"video": 2}, profile=NEW)
    assert small["video"] == 2 * 16  # 4 frames is the most two videos fit
    bounded = FakeVideoProcessor(size={"max_pixels": 56 * 56 * 16})
    # the budget split per video (56) or per temporal patch (79) gives fewer tokens than on
    # one frame (224): that wins, and its half would fall under 224
    assert budget.video_size_with_most_features(bounded, None, 16) == (224, 224)
    assert "video" not in info.max_tokens_per_item(processor, config)


def test_dummy_text_and_videos() -> None:
    processor = FakeVideoProcessor()
    counts = {"image": 1, "video": 2}
    assert dummy.dummy_text(processor, counts) == "<image>"
    assert dummy.dummy_text(processor, counts, profile=NEW) == "<image><video><video>"
    data = dummy.dummy_mm_data(processor, counts, {"video": {"num_frames": 3}},
                               profile=NEW, seq_len=10**6)
    assert [v.shape for v in data["video"]] == [(3, 312, 312, 3)] * 2
    assert data["video"][0].min() == 255
    sampling = FakeVideoProcessor(sample_frames=True)
    (item,) = dummy.dummy_mm_data(sampling, {"video": 1}, profile=NEW, seq_len=10**6)["video"]
    frames, metadata = item
    assert metadata == {"fps": 2.0, "duration": 8.0, "total_num_frames": 16,
                        "frames_indices": list(range(16)), "video_backend": "opencv",
                        "do_sample_frames": False}
    assert "video" not in dummy.dummy_mm_data(processor, counts)


def test_video_items_and_their_metadata() -> None:
    frames = make_video(4, 28, 56)
    assert video.normalise_video(frames, False) is frames
    assert video.normalise_video((frames, {"fps": 1}), False) is frames
    assert video.normalise_video((frames, {"fps": 1}), True) == (frames, {"fps": 1})
    assert video.normalise_video([frames[0], frames[1]], False).shape == (2, 28, 56, 3)
    with pytest.raises(ValueError, match="metadata"):
        video.normalise_video(frames, True)
    data = {"videos": [(frames, {"fps": 1, "do_sample_frames": True})]}
    assert video.split_video_metadata(data) == {"do_sample_frames": True}
    assert data == {"videos": [frames], "video_metadata": [{"fps": 1}]}
    mixed = {"videos": [(frames, {"do_sample_frames": True}), (frames, {})]}
    with pytest.raises(ValueError, match="agree"):
        video.split_video_metadata(mixed)
    assert video.split_video_metadata({"videos": [frames]}) == {}


@pytest.mark.parametrize("layout", ["flat", "batched", "tokens"])
def test_process_video(layout: str) -> None:
    processor = FakeVideoProcessor(layout=layout)
    videos = [make_video(4, 28, 56, 1), make_video(2, 56, 28, 2)]
    result = impl.process(processor, "a<video>b<image>c<video>",
                          {"video": videos, "image": [make_image(10, 10)]}, profile=NEW)
    (first, second) = result.placeholders["video"]
    assert (first.length, second.length) == (4, 2)
    items = result.item_fields["video"]
    assert [int(i["num_video_patches"]) for i in items] == (
        [1, 1] if layout == "tokens" else [4, 2])
    assert "num_video_tokens" not in items[0]
    assert [i["pixel_values_videos"].shape[0] for i in items] == (
        [1, 1] if layout == "batched" else [4, 2])
    if layout != "tokens":
        assert items[1]["video_grid_thw"].tolist() == [1, 2, 1]
    assert items[0]["second_per_grid_ts"].item() == 1.0
    assert "video_grid_thw" not in result.item_fields["image"][0]
    specs = fields.field_specs(processor, {"num_image_patches": torch.ones(1, dtype=int),
                                           "video_grid_thw": torch.ones(1, 3)}, profile=NEW)
    assert "video_grid_thw" not in specs  # filed under video, which has no items here


def test_unattributable_video_rows_are_an_error() -> None:
    processor = FakeVideoProcessor(layout="odd")
    with pytest.raises(ValueError, match="pixel_values_videos"):
        impl.process(processor, "<video>", {"video": [make_video(4, 28, 56)]}, profile=NEW)


def test_video_metadata_reaches_the_processor_only_where_it_samples() -> None:
    metadata = {"fps": 2.0, "total_num_frames": 4, "do_sample_frames": False}
    frames = make_video(4, 28, 56)
    plain = FakeVideoProcessor()
    impl.process(plain, "<video>", {"video": [(frames, metadata)]}, profile=NEW)
    assert "video_metadata" not in plain.calls[-1]
    sampling = FakeVideoProcessor(sample_frames=True)
    impl.process(sampling, "<video>", {"video": [(frames, metadata)]}, profile=NEW)
    call = sampling.calls[-1]
    assert call["video_metadata"] == [{"fps": 2.0, "total_num_frames": 4}]
    assert call["do_sample_frames"] is False
    # a request's option wins over the metadata's; the model's is merged under both
    # (OPTION_SCOPES: the backend adds the metadata's to the request's options)
    impl.process(sampling, "<video>", {"video": [(frames, metadata)]}, profile=NEW,
                 request_kwargs={"do_sample_frames": True})
    assert sampling.calls[-1]["do_sample_frames"] is True
    impl.process(sampling, "<video>", {"video": [(frames, metadata)]}, profile=NEW,
                 processor_kwargs={"do_sample_frames": True})
    assert sampling.calls[-1]["do_sample_frames"] is False


def test_video_hashes_cover_the_metadata_kept() -> None:
    frames = make_video(2, 28, 28)
    one, two = {"fps": 1.0}, {"fps": 2.0}
    sampling = FakeVideoProcessor(sample_frames=True)
    first = impl.process(sampling, "<video>", {"video": [(frames, one)]}, profile=NEW)
    second = impl.process(sampling, "<video>", {"video": [(frames, two)]}, profile=NEW)
    assert first.item_hashes["video"] != second.item_hashes["video"]
    plain = FakeVideoProcessor()
    first = impl.process(plain, "<video>", {"video": [(frames, one)]}, profile=NEW)
    second = impl.process(plain, "<video>", {"video": [(frames, two)]}, profile=NEW)
    assert first.item_hashes["video"] == second.item_hashes["video"]


def test_default_profile_keeps_video_grids_under_image() -> None:
    hf_inputs = {"num_image_patches": torch.tensor([1]), "pixel_values": torch.zeros(1, 3),
                 "video_grid_thw": torch.ones(1, 3, dtype=torch.long)}
    assert fields.field_specs(FakeProcessor(), hf_inputs)["video_grid_thw"].modality == "image"
    new = fields.field_specs(FakeProcessor(), hf_inputs, profile=NEW)
    assert "video_grid_thw" not in new


def test_offsets_only_profile() -> None:
    assert impl.strategy_for("5.14.0") == "legacy"
    assert impl.strategy_for("5.14.0", NEW) == "offsets"
    assert impl.strategy_for("5.14.0", DEFAULT) == "legacy"
    processor = FakeProcessor()
    with pytest.raises(ValueError, match="legacy"):
        impl.process(processor, "<image>", {"image": [make_image(10, 10)]}, strategy="legacy",
                     profile=NEW)
    result = impl.process(processor, "<image>", {"image": [make_image(10, 10)]}, profile=NEW)
    assert len(result.placeholders["image"]) == 1
    missing = FakeProcessor(offsets=False)
    with pytest.raises(ValueError, match="text_replacement_offsets") as error:
        impl.process(missing, "<image>", {"image": [make_image(10, 10)]}, profile=NEW)
    assert "transformers<5.15.0" not in str(error.value)
    assert "transformers<5.15.0" in str(offsets.missing_offsets_error(missing))


def test_size_candidates_and_most_tokens() -> None:
    size_candidates, size_with_most_tokens = budget.size_candidates, budget.size_with_most_tokens
    def sub(size: dict | None) -> SimpleNamespace:
        return SimpleNamespace(size=size)

    assert size_candidates(sub({"height": 5, "width": 7}), (1,)) == [(7, 5)]
    assert size_candidates(sub({"max_height": 5, "max_width": 7}), (1,)) == [(7, 5)]
    assert size_candidates(sub({"max_pixels": 100, "longest_edge": 4}), (1, 4, 1)) == \
        [(5, 5), (10, 10)]
    assert size_candidates(sub({"longest_edge": 3}), (4,)) == []  # a side of 0 is dropped
    assert size_candidates(sub({"shortest_edge": 3}), (1,)) == []
    assert size_candidates(sub(None), (1,)) == []
    assert size_candidates(SimpleNamespace(), (1,)) == []
    # a tie goes to the earlier size; then halved while the count holds
    assert size_with_most_tokens([(500, 500)], lambda s: 9) == (250, 250)
    assert size_with_most_tokens([(500, 500)], lambda s: min(s[0], 600)) == (625, 625)
    assert size_with_most_tokens([], lambda s: min(s[0], 1300)) == (2500, 2500)
