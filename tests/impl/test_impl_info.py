from types import SimpleNamespace

import pytest

from impl import info


def test_modalities_from_sub_processors() -> None:
    both = SimpleNamespace(image_processor=object(), feature_extractor=object())
    assert info.supported_modalities(both) == ["audio", "image"]
    assert info.supported_modalities(SimpleNamespace(image_processor=None)) == ["image"]
    assert info.supported_modalities(SimpleNamespace(audio_processor=object())) == ["audio"]
    assert info.supported_mm_limits(both) == {"audio": None, "image": None}


def test_audio_processor_preferred_over_feature_extractor() -> None:
    audio, legacy = object(), object()
    processor = SimpleNamespace(audio_processor=audio, feature_extractor=legacy)
    assert info.audio_processor(processor) is audio
    # present but None still counts as "found" and stops the search
    shadowed = SimpleNamespace(audio_processor=None, feature_extractor=legacy)
    assert info.audio_processor(shadowed) is None


def test_no_modality_is_an_error() -> None:
    class TextOnlyProcessor:
        tokenizer = object()

    with pytest.raises(ValueError, match="TextOnlyProcessor"):
        info.supported_modalities(TextOnlyProcessor())


def test_sampling_rate() -> None:
    sub = SimpleNamespace(sampling_rate=24000)
    assert info.audio_sampling_rate(SimpleNamespace(feature_extractor=sub)) == 24000
    assert info.audio_sampling_rate(SimpleNamespace(feature_extractor=object())) == 16000.0
    assert info.audio_sampling_rate(SimpleNamespace(image_processor=object())) == 16000.0


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (SimpleNamespace(audio_config=SimpleNamespace(max_source_positions=1500)), 1500),
        (SimpleNamespace(encoder_config=SimpleNamespace(max_position_embeddings=750)), 750),
        (SimpleNamespace(max_pos_emb=3.0), 3),
        (
            SimpleNamespace(
                audio_config=SimpleNamespace(max_source_positions=7, max_pos_emb=9),
                max_source_positions=11,
            ),
            7,
        ),
    ],
)
def test_max_audio_tokens(config: SimpleNamespace, expected: int) -> None:
    assert info.max_audio_tokens(config) == expected


def test_max_audio_tokens_names_what_it_tried() -> None:
    class WhisperishConfig:
        pass

    config = SimpleNamespace(audio_config=WhisperishConfig())
    with pytest.raises(ValueError, match="WhisperishConfig") as error:
        info.max_audio_tokens(config)
    for name in info.AUDIO_LENGTH_NAMES:
        assert name in str(error.value)


def test_max_image_tokens_asks_for_a_huge_image() -> None:
    seen = {}

    class Processor:
        image_processor = object()

        def _get_num_multimodal_tokens(self, image_sizes, **kwargs):
            seen.update(image_sizes=image_sizes, **kwargs)
            return {"num_image_tokens": [77, 1]}

    assert info.max_image_tokens(Processor(), {"max_patches": 3}) == 77
    assert seen == {"image_sizes": ([10_000, 10_000],), "max_patches": 3}
    config = SimpleNamespace(audio_config=SimpleNamespace(max_source_positions=5))
    processor = Processor()
    processor.feature_extractor = object()
    assert info.max_tokens_per_item(processor, config) == {"audio": 5, "image": 77}
