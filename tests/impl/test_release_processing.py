"""impl's processing side against the backend of the vLLM this process imports, under that
release's profile (`impl.release.profile_for(vllm.__version__)`), on every fixture.

Per fixture: the served modalities, the most tokens per item, the profiling image size, the
dummy text and the dummy media, and `impl.process` beside the backend's processor on the
recipe's own prompt and (where the backend serves video) on a prompt holding one video.
On vLLM 0.31.0 the same comparisons run under the default profile; the video ones skip.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
from backend_compare import (
    assert_same_outcome,
    every_fixture,
    outcome,
    run_backend,
    run_impl,
    transformers_version,
)

from impl import dummy, info
from impl.release import VIDEO, profile_for

pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm

MAX_ITEMS = 2  # images (and audios) per prompt the backend is built for
VIDEO_FRAMES = 4  # a multiple of every fixture's temporal patch (1 or 2)
VIDEO_HW = ((56, 84), (84, 56))  # (height, width) of each test video's frames


def vllm_version() -> str:
    import vllm

    return vllm.__version__


def profile() -> Any:
    return profile_for(vllm_version())


@functools.cache
def built(name: str) -> tuple[Any, Any] | str:
    """The recipe and the backend's processor (its limits: the recipe's modalities and one
    video), or why there is none (a known finding id, or an unsupported architecture)."""
    from conformance import expectations
    from conformance.checks.differences import error_text
    from conformance.subjects import vllm as oracle
    from fixtures.build import build_fixture
    from fixtures.registry import get_recipe

    recipe = get_recipe(name)
    if not recipe.supports(transformers_version()):
        return f"skip: {recipe.architecture} not in transformers {transformers_version()}"
    path = str(build_fixture(name))
    limits = {m: min(MAX_ITEMS, recipe.max_items) for m in recipe.modalities}
    if profile().has(VIDEO):
        limits["video"] = 1
    try:
        return recipe, oracle.create_processor(path, "transformers", limits)
    except Exception as error:
        known = expectations.explain(name, "processing", transformers_version(),
                                     "vllm-backend", error_text(error))
        if known is None:
            raise
        return f"xfail: {known.id}"


def backend_of(name: str) -> tuple[Any, Any]:
    found = built(name)
    if isinstance(found, str):
        kind, _, reason = found.partition(": ")
        (pytest.skip if kind == "skip" else pytest.xfail)(reason)
    return found


def model_kwargs(backend: Any) -> dict[str, Any]:
    """The deployment's processor options: what the backend counts tokens with."""
    return dict(backend.info.ctx.model_config.get_multimodal_config().mm_processor_kwargs or {})


def served_counts(backend: Any) -> dict[str, int]:
    return {m: (1 if m == "video" else MAX_ITEMS)
            for m in backend.info._get_supported_modalities()}


def seq_len(backend: Any) -> int:
    return int(backend.info.ctx.model_config.max_model_len)


# --- what the backend learns from the processor ---------------------------------------------


def same_outcome(theirs: Any, mine: Any, what: str) -> None:
    """The same value, or the same exception type, from the backend and impl."""
    expected, actual = outcome(theirs), outcome(mine)
    if isinstance(expected, type):
        assert actual is expected, f"{what}: backend raised {expected.__name__}, impl {actual}"
    else:
        assert actual == expected, what


@pytest.mark.parametrize("name", every_fixture())
def test_info(name: str) -> None:
    """Served modalities, the profiling image size, the most tokens per item, dummy text."""
    _, backend = backend_of(name)
    hf = backend.info.get_hf_processor()
    kwargs, length = model_kwargs(backend), seq_len(backend)
    modalities = backend.info._get_supported_modalities()
    counts = served_counts(backend)
    same_outcome(backend.info._get_supported_modalities,
                 lambda: info.supported_modalities(hf, kwargs, profile=profile()), "modalities")
    if "image" in modalities:
        same_outcome(lambda: tuple(backend.info.get_image_size_with_most_features()),
                     lambda: info.largest_image_size(hf, kwargs, profile=profile()),
                     "image size")
    same_outcome(lambda: backend.info.get_mm_max_tokens_per_item(length, counts),
                 lambda: info.max_tokens_per_item(hf, backend.info.get_hf_config(), kwargs,
                                                  seq_len=length, mm_counts=counts,
                                                  profile=profile()),
                 "max tokens per item")
    same_outcome(lambda: backend.dummy_inputs.get_dummy_text(counts),
                 lambda: dummy.dummy_text(hf, counts, profile=profile(), processor_kwargs=kwargs),
                 "dummy text")


def describe_media(data: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """Each dummy item by what profiling reads of it: an image's size and mode, an audio's
    shape and peak, a video's frames' shape, dtype, darkest value and its metadata (if any).
    An image's colour is left to `test_dummy_image_colour`."""
    def one(modality: str, item: Any) -> Any:
        if modality == "image":
            return item.size, item.mode
        if modality == "video":
            frames, metadata = item if isinstance(item, tuple) else (item, None)
            return frames.shape, str(frames.dtype), int(frames.min()), metadata
        return np.asarray(item).shape, float(np.abs(item).max())

    return {m: [one(m, item) for item in items] for m, items in data.items()}


@pytest.mark.parametrize("name", every_fixture())
def test_dummy_mm_data(name: str) -> None:
    _, backend = backend_of(name)
    hf = backend.info.get_hf_processor()
    counts = served_counts(backend)
    same_outcome(
        lambda: describe_media(dict(
            backend.dummy_inputs.get_dummy_mm_data(seq_len(backend), counts, {}))),
        lambda: describe_media(dummy.dummy_mm_data(hf, counts, profile=profile(),
                                                   processor_kwargs=model_kwargs(backend),
                                                   seq_len=seq_len(backend))),
        "dummy media")


def test_dummy_image_colour() -> None:
    """vLLM's `Image.new('RGB', size, color=255)` fills the first band alone (red), in 0.31.0 as
    in 0.34.0: impl's dummy image is the same pixels."""
    from types import SimpleNamespace

    from vllm.multimodal.processing.dummy_inputs import BaseDummyInputsBuilder

    (theirs,) = BaseDummyInputsBuilder._get_dummy_images(None, width=4, height=3, num_images=1)
    (mine,) = dummy.dummy_mm_data(SimpleNamespace(image_processor=object()), {"image": 1},
                                  {"image": {"width": 4, "height": 3}})["image"]
    assert np.array_equal(np.asarray(mine), np.asarray(theirs))


# --- processing ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", every_fixture())
def test_process_recipe_prompt(name: str) -> None:
    """The recipe's own prompt and items, and its first item alone."""
    from conformance.checks.processing import smoke_case

    recipe, backend = backend_of(name)
    hf = backend.info.get_hf_processor()
    config = backend.info.get_hf_config()
    dtype = backend.info.ctx.model_config.dtype
    case = smoke_case(recipe, backend.info.ctx.model_config.model)
    for each in (case, case.single(0)):
        prompt = each.prompt(recipe.placeholder[each.modality])
        expected = outcome(lambda p=prompt, e=each: run_backend(backend, p, e.mm_data()))
        actual = outcome(lambda p=prompt, e=each: run_impl(
            hf, p, e.mm_data(), dtype=dtype, config=config, processor_kwargs=model_kwargs(backend),
            profile=profile()))
        assert_same_outcome(expected, actual)


def video_items(count: int) -> list[Any]:
    from conformance.inputs.media import make_media

    return [make_media("video", h, w, 0, seed, VIDEO_FRAMES)
            for seed, (h, w) in enumerate(VIDEO_HW[:count])]


@pytest.mark.parametrize("name", every_fixture())
def test_process_video(name: str) -> None:
    """A prompt holding one video (with its decoder's metadata, as vLLM gives it), alone and
    beside an image, wherever the backend serves video."""
    from conformance.inputs.media import make_items, mm_data

    recipe, backend = backend_of(name)
    if not profile().has(VIDEO):
        pytest.skip(f"vLLM {vllm_version()} serves no video")
    if "video" not in backend.info._get_supported_modalities():
        pytest.skip("the backend serves this model without video")
    hf = backend.info.get_hf_processor()
    config = backend.info.get_hf_config()
    dtype = backend.info.ctx.model_config.dtype
    video = mm_data("video", video_items(1))
    cases = [(f"Watch {hf.video_token} and say what happens.", video)]
    if "image" in backend.info._get_supported_modalities():
        image = recipe.placeholder.get("image") or getattr(hf, "image_token", "")
        cases.append((f"{image} then {hf.video_token}?", {"image": make_items("image", 1),
                                                          **video}))
    for prompt, data in cases:
        expected = outcome(lambda p=prompt, d=data: run_backend(backend, p, d))
        actual = outcome(lambda p=prompt, d=data: run_impl(
            hf, p, d, dtype=dtype, config=config, processor_kwargs=model_kwargs(backend),
            profile=profile()))
        assert_same_outcome(expected, actual)
