import numpy as np
import torch

from impl.unpad import apply_unpad_images, audios_need_reprocessing, unpad_audios, unpad_images


def padded_batch() -> dict[str, torch.Tensor]:
    pixels = torch.zeros(2, 3, 6, 8)
    pixels[0, :, :4, :8] = 1
    pixels[1, :, :6, :5] = 2
    return {"pixel_values": pixels, "image_sizes": torch.tensor([[4, 8], [6, 5]])}


def test_padded_images_are_trimmed() -> None:
    inputs = padded_batch()
    apply_unpad_images(inputs)
    first, second = inputs["pixel_values"]
    assert first.shape == (3, 4, 8) and bool((first == 1).all())
    assert second.shape == (3, 6, 5) and bool((second == 2).all())


def test_sizes_that_do_not_describe_the_padding_are_left_alone() -> None:
    inputs = padded_batch()
    inputs["image_sizes"] = torch.tensor([[400, 800], [600, 500]])  # original sizes
    assert unpad_images(inputs) is None


def test_only_four_dimensional_batches_of_matching_length() -> None:
    inputs = padded_batch()
    assert unpad_images({**inputs, "pixel_values": inputs["pixel_values"][None]}) is None
    assert unpad_images({**inputs, "image_sizes": inputs["image_sizes"][:1]}) is None
    assert unpad_images({**inputs, "image_sizes": inputs["image_sizes"].tolist()}) is None
    assert unpad_images({"pixel_values": inputs["pixel_values"]}) is None


def test_equal_length_audios_stay_batched() -> None:
    assert not audios_need_reprocessing([np.zeros(5), np.zeros(5)])
    assert not audios_need_reprocessing([])
    assert not audios_need_reprocessing(None)
    assert audios_need_reprocessing([np.zeros(5), np.zeros(6)])


def test_audios_of_different_lengths_are_reprocessed_alone() -> None:
    audios = [np.ones(2), np.ones(4)]
    inputs = {
        "input_features": torch.zeros(2, 1, 4),
        "input_features_mask": torch.ones(2, 4),
        "feature_lengths": [2, 4],  # not a tensor: kept
    }
    seen = []

    def alone(clip: np.ndarray) -> dict[str, torch.Tensor]:
        seen.append(len(clip))
        n = len(clip)
        return {
            "input_features": torch.full((1, 1, n), float(n)),
            "input_features_mask": torch.ones(1, n),
            "feature_lengths": torch.tensor([n]),
        }

    names = {"input_features", "input_features_mask", "feature_lengths", "absent"}
    replaced = unpad_audios(inputs, audios, names, alone)
    assert seen == [2, 4]
    assert set(replaced) == {"input_features", "input_features_mask"}
    assert [t.shape for t in replaced["input_features"]] == [(1, 2), (1, 4)]
    assert unpad_audios(inputs, [np.ones(3)] * 2, names, alone) == {}
