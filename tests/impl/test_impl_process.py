"""`impl.process` end to end on fake processors, both strategies."""

import logging

import pytest
import torch
from impl_fakes import FakeProcessor, FakeTokenizer, audio, make_image

import impl

STRATEGIES = ("offsets", "legacy")


def spans(result: impl.ProcessedPrompt, modality: str) -> list[tuple[int, int, tuple[int, ...]]]:
    return [(p.offset, p.length, p.embed_positions) for p in result.placeholders[modality]]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_images(strategy: str) -> None:
    processor = FakeProcessor()
    images = [make_image(10, 30, 1), make_image(20, 10, 2)]
    result = impl.process(processor, "a<image>b<image>", {"image": images}, strategy=strategy)
    tokens = processor.tokenizer
    assert tokens.decode(result.prompt_ids) == (
        "<s>a<boi>" + "<image>" * 3 + "<eoi>b<boi>" + "<image>" * 2 + "<eoi>"
    )
    assert spans(result, "image") == [(2, 5, (3, 4, 5)), (8, 4, (9, 10))]
    first, second = result.item_fields["image"]
    # padded pixel values are trimmed back to each image
    assert first["pixel_values"].shape == (3, 10, 30)
    assert second["pixel_values"].shape == (3, 20, 10)
    assert int(first["num_image_patches"]) == 1
    assert len(set(result.item_hashes["image"])) == 2


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_item_data_does_not_depend_on_its_neighbours(strategy: str) -> None:
    processor = FakeProcessor(audio=True)
    image, big = make_image(10, 10, 3), make_image(40, 40, 4)
    clip, long = audio(3), audio(9)
    alone = impl.process(processor, "<audio><image>", {"image": [image], "audio": [clip]},
                         strategy=strategy)
    crowd = impl.process(
        processor,
        "<audio> <audio><image><image>",
        {"image": [image, big], "audio": [clip, long]},
        strategy=strategy,
    )
    assert alone.item_hashes["image"][0] == crowd.item_hashes["image"][0]
    assert alone.item_hashes["audio"][0] == crowd.item_hashes["audio"][0]
    assert crowd.item_fields["audio"][1]["input_features"].shape == (2, 9)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_audio_tokens_counted(strategy: str) -> None:
    processor = FakeProcessor(image=False, audio=True)
    result = impl.process(
        processor, "x<audio>y<audio>", {"audio": [audio(2), audio(4)]}, strategy=strategy
    )
    assert spans(result, "audio") == [(2, 2, (2, 3)), (5, 4, (5, 6, 7, 8))]
    counts = [int(item["num_audio_tokens"]) for item in result.item_fields["audio"]]
    assert counts == [2, 4]


def test_adjacent_audio_placeholders() -> None:
    processor = FakeProcessor(image=False, audio=True)
    data = {"audio": [audio(2), audio(3)]}
    with pytest.raises(ValueError, match="run"):
        impl.process(processor, "<audio><audio>", data, strategy="legacy")
    # offsets know each item's expansion, so adjacency is no problem
    result = impl.process(processor, "<audio><audio>", data, strategy="offsets")
    assert spans(result, "audio") == [(1, 2, (1, 2)), (3, 3, (3, 4, 5))]


def test_prompt_as_token_ids_is_taken_as_is() -> None:
    processor = FakeProcessor()
    ids = processor.tokenizer.encode("<image>z", add_special_tokens=False)
    result = impl.process(processor, ids, {"image": [make_image(10, 10)]}, strategy="offsets")
    assert processor.tokenizer.decode(result.prompt_ids) == "<boi><image><eoi>z"


def test_missing_offsets_is_an_error() -> None:
    processor = FakeProcessor(offsets=False)
    with pytest.raises(ValueError, match="text_replacement_offsets"):
        impl.process(processor, "<image>", {"image": [make_image(10, 10)]}, strategy="offsets")


@pytest.mark.parametrize(
    ("strategy", "error"), [("offsets", AssertionError), ("legacy", ValueError)]
)
def test_too_few_placeholders(strategy: str, error: type[Exception]) -> None:
    processor = FakeProcessor()
    images = [make_image(10, 10), make_image(10, 20)]
    with pytest.raises(error):
        impl.process(processor, "only <image>", {"image": images}, strategy=strategy)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_no_media_and_a_processor_rejecting_bare_placeholders(strategy: str) -> None:
    processor = FakeProcessor(reject_bare_placeholders=True)
    result = impl.process(processor, "hi <image>", {}, strategy=strategy)
    tokens = processor.tokenizer
    # legacy re-tokenizes the decoded prompt with special tokens, so its BOS is doubled
    expected = "<s><s>hi <image>" if strategy == "legacy" else "<s>hi <image>"
    assert tokens.decode(result.prompt_ids) == expected
    assert result.placeholders == {} and result.item_fields == {}


def test_legacy_calls_processor_on_the_real_prompt() -> None:
    processor = FakeProcessor()
    impl.process(processor, "q<image>", {"image": [make_image(10, 10)]}, strategy="legacy",
                 processor_kwargs={"foo": 1})
    (call,) = processor.calls
    assert call["text"] == "<s>q<image>"
    assert call["add_special_tokens"] is False
    assert call["truncation"] is False and call["foo"] == 1


def test_offsets_calls_processor_on_dummy_text() -> None:
    processor = FakeProcessor()
    images = [make_image(10, 10)] * 2
    impl.process(processor, "<image>q<image>", {"image": images}, strategy="offsets")
    (call,) = processor.calls
    assert call["text"] == "<image><image>" and call["truncation"] is False


def test_unserved_modality() -> None:
    with pytest.raises(ValueError, match="audio"):
        impl.process(FakeProcessor(), "<audio>", {"audio": [audio(1)]}, strategy="offsets")


def test_audio_at_another_rate() -> None:
    processor = FakeProcessor(image=False, audio=True)
    with pytest.raises(NotImplementedError):
        impl.process(processor, "<audio>", {"audio": [(audio(2), 8000)]}, strategy="offsets")
    result = impl.process(processor, "<audio>", {"audio": [(audio(2), 16000)]},
                          strategy="offsets")
    assert spans(result, "audio") == [(1, 2, (1, 2))]


def test_unknown_strategy() -> None:
    with pytest.raises(ValueError, match="strategy"):
        impl.process(FakeProcessor(), "x", {}, strategy="regex")


def test_default_strategy_follows_installed_transformers() -> None:
    import transformers

    processor = FakeProcessor(offsets=False)
    data = {"image": [make_image(10, 10)]}
    if impl.strategy_for(transformers.__version__) == "offsets":
        with pytest.raises(ValueError):
            impl.process(processor, "<image>", data)
    else:
        assert impl.process(processor, "<image>", data).placeholders


def test_unattributed_outputs_warn(caplog: pytest.LogCaptureFixture) -> None:
    class ExtraOutput(FakeProcessor):
        def __call__(self, *args, **kwargs):
            out = super().__call__(*args, **kwargs)
            out["mystery"] = torch.zeros(1)
            return out

    processor = ExtraOutput(audio=True)
    with caplog.at_level(logging.WARNING, logger="impl.fields"):
        result = impl.process(
            processor,
            "<audio><image>",
            {"image": [make_image(10, 10)], "audio": [audio(1)]},
            strategy="offsets",
        )
    assert "mystery" in caplog.text
    assert all("mystery" not in item for items in result.item_fields.values() for item in items)


def test_wrapped_placeholder_target() -> None:
    # a multi-token target: "<boi>" followed by "<image>"
    class Wrapped(FakeProcessor):
        image_token = "<boi><image>"

        def image_replacement(self, image):
            return "<boi>" + "<image>" * self.image_tokens(image.height, image.width)

    processor = Wrapped(tokenizer=FakeTokenizer())
    result = impl.process(processor, "a<boi><image>", {"image": [make_image(10, 20)]},
                          strategy="offsets")
    assert spans(result, "image") == [(2, 3, (3, 4))]


def test_the_cache_serves_repeated_partial_and_reordered_hits_as_uncached() -> None:
    """Offsets path: cached items skip the processor and give what processing gives; the key is
    the input item (a processed field never enters it)."""
    from impl.cache import ProcessorCache

    processor = FakeProcessor(audio=True)
    a, b = make_image(10, 30, 1), make_image(20, 10, 2)
    prompt = "x<image>y<image>"

    def run(images, cache=None):
        return impl.process(processor, prompt, {"image": images}, strategy="offsets",
                            cache=cache, model_id="fake")

    cache = ProcessorCache()
    run([a], cache)  # a alone first: the request after it is a partial hit
    assert (cache.hits, cache.misses) == (0, 1)
    partial = run([a, b], cache)
    assert (cache.hits, cache.misses) == (1, 2)
    again, reordered = run([a, b], cache), run([b, a], cache)
    assert (cache.hits, cache.misses) == (5, 2)
    for cached, images in ((partial, [a, b]), (again, [a, b]), (reordered, [b, a])):
        plain = run(images)
        assert cached.prompt_ids == plain.prompt_ids
        assert cached.placeholders == plain.placeholders
        assert dict(cached.item_hashes) == dict(plain.item_hashes)
        for mine, theirs in zip(cached.item_fields["image"], plain.item_fields["image"],
                                strict=True):
            assert mine.keys() == theirs.keys()
            assert all(torch.equal(mine[k], theirs[k]) for k in mine)
    assert reordered.item_hashes["image"] == again.item_hashes["image"][::-1]


def test_the_legacy_path_never_consults_the_cache() -> None:
    from impl.cache import ProcessorCache

    cache = ProcessorCache()
    for _ in range(2):
        impl.process(FakeProcessor(), "a<image>", {"image": [make_image(10, 30, 1)]},
                     strategy="legacy", cache=cache)
    assert (cache.hits, cache.misses) == (0, 0)
