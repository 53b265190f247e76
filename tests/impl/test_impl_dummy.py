from types import SimpleNamespace

import numpy as np

from impl import dummy


def test_audio_placeholders_are_space_separated() -> None:
    processor = SimpleNamespace(feature_extractor=object(), audio_token="<a>")
    assert dummy.dummy_text(processor, {"audio": 3}) == "<a> <a> <a>"


def test_image_token_wrapped_when_markers_exist() -> None:
    plain = SimpleNamespace(image_processor=object(), image_token="<i>")
    assert dummy.dummy_text(plain, {"image": 2}) == "<i><i>"
    wrapped = SimpleNamespace(
        image_processor=object(), image_token="<i>", image_start_token="[", image_end_token="]"
    )
    assert dummy.dummy_text(wrapped, {"image": 2}) == "[<i>][<i>]"


def test_gemma3_uses_begin_of_image_token() -> None:
    class Gemma3Processor:
        image_processor = object()
        image_token = "<image_soft_token>"
        boi_token = "<start_of_image>"

    assert dummy.dummy_text(Gemma3Processor(), {"image": 2}) == "<start_of_image>" * 2


def test_audio_text_comes_before_images_and_unserved_counts_are_ignored() -> None:
    processor = SimpleNamespace(
        image_processor=object(), feature_extractor=object(), audio_token="<a>", image_token="<i>"
    )
    assert dummy.dummy_text(processor, {"image": 1, "audio": 2, "video": 4}) == "<a> <a><i>"
    assert dummy.dummy_text(SimpleNamespace(image_processor=object()), {"audio": 1}) == ""


def test_dummy_audio_length() -> None:
    sub = SimpleNamespace(sampling_rate=8000, chunk_length=2)
    assert dummy.dummy_audio_length(SimpleNamespace(feature_extractor=sub)) == 16000
    no_chunk = SimpleNamespace(feature_extractor=SimpleNamespace(chunk_length=None))
    assert dummy.dummy_audio_length(no_chunk) == 30 * 16000


def test_dummy_media_with_overrides() -> None:
    processor = SimpleNamespace(
        image_processor=object(), feature_extractor=SimpleNamespace(sampling_rate=100)
    )
    data = dummy.dummy_mm_data(
        processor,
        {"audio": 2, "image": 1},
        {"audio": {"length": 10**9}, "image": {"width": 8, "height": 6}},
    )
    assert [a.shape for a in data["audio"]] == [(3000,), (3000,)]  # a larger override is ignored
    assert not np.any(data["audio"][0])
    (image,) = data["image"]
    assert image.size == (8, 6) and image.mode == "RGB"
    # vLLM's fill of 255 sets the first band alone
    assert (np.asarray(image) == [255, 0, 0]).all()
    assert dummy.capped(10, 4) == 4 and dummy.capped(10, None) == 10


def test_dummy_prompt_ids() -> None:
    from impl_fakes import FakeProcessor

    processor = FakeProcessor(audio=True)
    ids = dummy.dummy_prompt_ids(processor, {"image": 1, "audio": 1})
    assert processor.tokenizer.decode(ids) == "<s><audio><image>"
