import logging
from types import SimpleNamespace

import pytest
import torch

from impl import fields


def processor() -> SimpleNamespace:
    return SimpleNamespace(
        image_processor=SimpleNamespace(model_input_names=["pixel_values", "image_grid_thw"]),
        feature_extractor=SimpleNamespace(model_input_names=["input_features"]),
    )


def test_modality_field_names() -> None:
    assert fields.modality_field_names(processor(), "audio") == {
        "audio_embeds",
        "input_features",
        "input_features_mask",
    }
    assert fields.modality_field_names(SimpleNamespace(), "image") == {"image_embeds"}


def test_single_modality_owns_every_key() -> None:
    assert fields.partition_keys_by_modality(processor(), ["a", "b"], ["image"]) == {
        "image": ["a", "b"]
    }


def test_partition_and_warning(caplog: pytest.LogCaptureFixture) -> None:
    keys = ["pixel_values", "input_features_mask", "image_embeds", "stray"]
    with caplog.at_level(logging.WARNING, logger="impl.fields"):
        owned = fields.partition_keys_by_modality(processor(), keys, ["audio", "image"])
    assert owned == {"audio": ["input_features_mask"], "image": ["pixel_values", "image_embeds"]}
    assert "stray" in caplog.text


def test_slice_dim() -> None:
    assert fields.slice_dim(torch.zeros(5, 3), 5) == 0
    assert fields.slice_dim(torch.zeros(1, 5, 3), 5) == 1  # leading batch dimension
    assert fields.slice_dim(torch.zeros(5, 5), 5) == 0
    assert fields.slice_dim(torch.zeros(5), 2) == 0
    assert fields.slice_dim([torch.zeros(2, 5)], 5) == 0


def test_leading_batch_dimension_is_sliced_on_dim_one() -> None:
    pixels = torch.arange(5).reshape(1, 5, 1, 1, 1).expand(1, 5, 3, 2, 2).clone()
    inputs = {"pixel_values": pixels, "num_image_patches": torch.tensor([2, 3])}
    specs = fields.field_specs(SimpleNamespace(image_processor=None), inputs)
    assert specs["pixel_values"] == fields.FieldSpec("image", (2, 3), 1)
    items = fields.split_items(inputs, specs)["image"]
    assert [tuple(i["pixel_values"].shape) for i in items] == [(1, 2, 3, 2, 2), (1, 3, 3, 2, 2)]
    assert int(items[1]["pixel_values"][0, 0, 0, 0, 0]) == 2
    assert [int(i["num_image_patches"]) for i in items] == [2, 3]


def test_field_specs_layouts_and_cpu_fields() -> None:
    inputs = {
        "attention_mask": torch.ones(1, 4),
        "pixel_values": torch.zeros(5, 7),
        "image_grid_thw": torch.tensor([[1, 1, 2], [1, 1, 3]]),
        "input_features": torch.zeros(2, 8),
        "input_features_mask": [torch.ones(3), torch.ones(8)],
        "num_image_patches": torch.tensor([2, 3]),
        "num_audio_tokens": torch.tensor([4, 1]),
        "image_replacement_ids": torch.tensor([9, 9, 9]),
        "image_replacement_sizes": torch.tensor([1, 2]),
    }
    specs = fields.field_specs(processor(), inputs)
    assert "attention_mask" not in specs and "image_replacement_sizes" not in specs
    assert specs["pixel_values"].layout == "flat" and specs["pixel_values"].sizes == (2, 3)
    assert specs["input_features"].layout == "batched"  # audio is always per item
    assert specs["input_features_mask"].layout == "batched"
    assert specs["image_replacement_ids"] == fields.FieldSpec("image", (1, 2), 0, True)
    assert fields.keep_on_cpu_keys(specs) == {
        "num_image_patches",
        "num_audio_tokens",
        "image_replacement_ids",
        "image_grid_thw",
        "video_grid_thw",
    }
    # grids are one row per image even though the image processor declares them
    assert specs["image_grid_thw"].layout == "batched"
    items = fields.split_items(inputs, specs)
    assert [i["image_replacement_ids"].tolist() for i in items["image"]] == [[9], [9, 9]]
    assert [tuple(i["image_grid_thw"].tolist()) for i in items["image"]] == [(1, 1, 2), (1, 1, 3)]
    assert len(items["audio"]) == 2 and "video_grid_thw" not in items["image"][0]


def test_no_modality_means_no_fields() -> None:
    assert fields.field_specs(processor(), {"attention_mask": torch.ones(1)}) == {}


def test_item_counts_must_agree() -> None:
    inputs = {"input_features": torch.zeros(3, 2), "num_audio_tokens": torch.tensor([1, 1])}
    specs = fields.field_specs(processor(), inputs)
    with pytest.raises(ValueError, match="number of items"):
        fields.split_items(inputs, specs)


def test_sizes_must_be_one_dimensional() -> None:
    with pytest.raises(ValueError, match="one-dimensional"):
        fields.flat_from_sizes("image", torch.ones(2, 2))
    with pytest.raises(ValueError, match="one-dimensional"):
        fields.flat_from_sizes("image", [[2], [3]])


def test_sizes_of_any_form_give_one_spec() -> None:
    # a tensor (the backend's form), a list, or the ints of a spec already made (reused by
    # field_specs for every field of a modality)
    spec = fields.flat_from_sizes("image", torch.tensor([2, 3]), 1)
    assert spec == fields.flat_from_sizes("image", [2, 3], 1)
    assert spec == fields.flat_from_sizes("image", spec.sizes, 1) == fields.FieldSpec(
        "image", (2, 3), 1)


def test_long_tensor_is_what_torch_tensor_makes_of_ints() -> None:
    for values in ([2, 3, 4], [7], []):
        made = fields.long_tensor(values)
        assert made.dtype == torch.long and made.shape == (len(values),)
        assert made.tolist() == values


class Counting:
    image_processor = None

    def __init__(self, patches: list[int] | None) -> None:
        self.patches = patches

    def _get_num_multimodal_tokens(self, image_sizes, **kwargs):
        return {"num_image_tokens": [1] * len(image_sizes), "num_image_patches": self.patches}


def test_rows_per_image_sources() -> None:
    images = [SimpleNamespace(height=4, width=4)] * 2
    grid = {"image_grid_thw": torch.tensor([[1, 2, 2], [1, 1, 2]]), "pixel_values": torch.zeros(6)}
    assert fields.image_rows_per_item(Counting([9, 9]), grid, images, 2).tolist() == [4, 2]
    counted = {"pixel_values": torch.zeros(5, 3)}
    assert fields.image_rows_per_item(Counting([2, 3]), counted, images, 2).tolist() == [2, 3]
    # the processor cannot say (None counts, or images without a size): one row each
    ones = {"pixel_values": torch.zeros(2, 3)}
    assert fields.image_rows_per_item(Counting(None), ones, images, 2).tolist() == [1, 1]
    assert fields.image_rows_per_item(Counting([2, 3]), ones, [object()], 2).tolist() == [1, 1]


def test_row_layout_is_the_count_and_the_dimension_before_any_check() -> None:
    images = [SimpleNamespace(height=4, width=4)] * 2
    # Idefics3's leading batch dimension: the rows lie along dim 1
    batched = {"pixel_values": torch.zeros(1, 5, 3, 2, 2)}
    assert fields.image_row_layout(Counting([2, 3]), batched, images, 2) == ([2, 3], 1)
    # counts that do not add up are still reported (the guard is image_rows_per_item's)
    assert fields.image_row_layout(Counting([4, 4]), batched, images, 2) == ([4, 4], 0)
    # un-padded data is one entry per image: no dimension to cut along
    unpadded = {"pixel_values": [torch.zeros(3, 2, 2), torch.zeros(3, 1, 2)]}
    assert fields.image_row_layout(Counting(None), unpadded, images, 2) == ([1, 1], None)


def test_rows_that_do_not_add_up() -> None:
    images = [SimpleNamespace(height=4, width=4)] * 2
    with pytest.raises(ValueError, match="7 row"):
        fields.image_rows_per_item(Counting([2, 3]), {"image_patches": torch.zeros(7)}, images, 2)
    # un-padded (list) image data is not checked
    listed = {"pixel_values": [torch.zeros(1)] * 7}
    assert fields.image_rows_per_item(Counting([2, 3]), listed, images, 2).tolist() == [2, 3]


def test_item_hashes_are_computed_on_first_read_and_compare_like_a_dict() -> None:
    from impl.hashing import ItemHashes, media_hashes

    media = {"image": [torch.ones(2, 3), torch.zeros(2, 3)]}
    lazy = ItemHashes(lambda: media_hashes("m", media, {}))
    assert lazy._hashes is None  # nothing hashed until someone reads it
    expected = media_hashes("m", media, {})
    assert lazy == expected and expected == lazy
    assert lazy.get("audio", ()) == () and dict(lazy) == expected
    assert repr(lazy) == repr(expected)
    assert lazy != {"image": expected["image"][::-1]}
