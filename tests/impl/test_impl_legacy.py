from types import SimpleNamespace

import numpy as np
import pytest
import torch
from impl_fakes import FakeTokenizer

from impl import legacy

TOKENIZER = FakeTokenizer()


def test_token_ids_declared_by_the_processor() -> None:
    processor = SimpleNamespace(image_token_ids=[None, 5, 6], image_token_id=9)
    assert legacy.mm_token_ids(processor, None, TOKENIZER, "image") == [5, 6]


def test_token_id_attribute_then_config_then_vocabulary() -> None:
    processor = SimpleNamespace(image_token_ids=[None], image_token_id=9)
    assert legacy.mm_token_ids(processor, None, TOKENIZER, "image") == [9]
    config = SimpleNamespace(image_token_index=11)
    assert legacy.mm_token_ids(SimpleNamespace(), config, TOKENIZER, "image") == [11]
    # a processor attribute that is None skips the config and goes to the vocabulary
    processor = SimpleNamespace(audio_token_id=None, audio_token="<audio>")
    audio_id = TOKENIZER.token_id("<audio>")
    assert legacy.mm_token_ids(processor, config, TOKENIZER, "audio") == [audio_id]


def test_no_token_id_anywhere() -> None:
    processor = SimpleNamespace(audio_token="<not-in-vocab>")
    with pytest.raises(ValueError, match="audio token id"):
        legacy.mm_token_ids(processor, SimpleNamespace(), TOKENIZER, "audio")


def test_token_runs() -> None:
    assert legacy.token_runs([True, True, False, True, False, False, True]) == [
        (0, 2),
        (3, 1),
        (6, 1),
    ]
    assert legacy.token_runs([]) == []


def test_audio_placeholders_are_runs() -> None:
    found = legacy.audio_placeholders([0, 8, 8, 0, 9, 8, 1], [8, 9], 2)
    assert [(p.offset, p.length, p.embed_positions) for p in found] == [
        (1, 2, (1, 2)),
        (4, 2, (4, 5)),
    ]


def test_adjacent_audio_placeholders_merge_into_one_run() -> None:
    with pytest.raises(ValueError, match="1 run"):
        legacy.audio_placeholders([0, 8, 8, 8, 8, 0], [8], 2)


def test_prompt_without_audio_token() -> None:
    with pytest.raises(ValueError, match="no audio token"):
        legacy.audio_placeholders([0, 1, 2], [8], 1)


def test_image_placeholders_split_typed_positions() -> None:
    prompt = [0, 20, 7, 7, 21, 0, 20, 7, 21]
    types = torch.tensor([[0, 1, 1, 1, 1, 0, 1, 1, 1]])
    positions = legacy.image_typed_positions(types)
    legacy.check_image_token_total(positions, [4, 3], "P", 2)
    found = legacy.split_image_placeholders(prompt, positions, [4, 3], [7])
    assert [(p.offset, p.length, p.embed_positions) for p in found] == [
        (1, 4, (2, 3)),
        (6, 3, (7,)),
    ]


def test_image_span_with_gaps_is_read_from_its_offset() -> None:
    # typed positions 1, 2, 4: the range starts at 1 and holds 3 positions
    found = legacy.split_image_placeholders([0, 7, 5, 0, 7], [1, 2, 4], [3], [7])
    assert [(p.offset, p.length, p.embed_positions) for p in found] == [(1, 3, (1, 3))]


def test_image_count_mismatch() -> None:
    with pytest.raises(ValueError, match="3 position"):
        legacy.check_image_token_total([1, 2, 3], [2, 2], "LlavaProcessor", 2)


def test_missing_type_ids() -> None:
    with pytest.raises(ValueError, match="LlavaProcessor returned no mm_token_type_ids"):
        legacy.require_type_ids(None, "LlavaProcessor")


def test_image_size_hw() -> None:
    from PIL import Image

    assert legacy.image_size_hw(Image.new("RGB", (30, 20))) == (20, 30)
    assert legacy.image_size_hw(np.zeros((20, 30, 3))) == (20, 30)
    assert legacy.image_size_hw(torch.zeros(3, 20, 30)) == (20, 30)
