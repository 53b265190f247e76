"""impl's merging of processor options (`impl.options`) against the imported vLLM's own, under
that release's profile (`impl.release.profile_for(vllm.__version__)`; `OPTION_SCOPES` from
0.32.0 on).

The functions compared are those the Transformers backend's processing goes through: the
model's config merging a request's options (`MultiModalConfig.merge_mm_processor_kwargs`), the
options of every HF call (`InputProcessingContext.get_merged_mm_kwargs`, in `call_hf_processor`
and the backend's row count), and what a request's processor is built from (`get_hf_processor`
through `cached_processor_from_config`). Then Gemma3 with a flat model-level option and the
same option scoped in a request, through `impl.process` and the backend's processor.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from backend_compare import outcome, same_value
from hypothesis import given, settings
from hypothesis import strategies as st

import conformance.inputs.strategies  # noqa: F401 - registers the project's hypothesis profiles
from impl.options import (
    SCOPES,
    call_options,
    construction_options,
    merge_options,
    resolve_scopes,
)
from impl.release import OPTION_SCOPES, profile_for

pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm

DEV = settings.get_profile("dev")

# option names: a few flat ones, and one group's name inside a group (never resolved away)
NAMES = ("size", "do_resize", "fps", "crop")
LEAF = st.one_of(st.none(), st.integers(0, 3), st.booleans())
VALUE = st.recursive(
    LEAF, lambda inner: st.dictionaries(st.sampled_from((*NAMES, "text_kwargs")), inner,
                                        max_size=3),
    max_leaves=6)
FLAT = st.dictionaries(st.sampled_from(NAMES), VALUE, max_size=4)
# a group: options (empty or not), or a value that is none (None, a number)
GROUP = st.one_of(st.none(), st.integers(0, 3), FLAT,
                  st.dictionaries(st.sampled_from((*NAMES, "text_kwargs")), VALUE, max_size=3))
OPTIONS = st.builds(lambda flat, groups: {**flat, **groups}, FLAT,
                    st.dictionaries(st.sampled_from(SCOPES), GROUP, max_size=3))


def profile() -> Any:
    import vllm

    return profile_for(vllm.__version__)


def mm_config(model: dict[str, Any]) -> Any:
    """The multimodal config of a Transformers-backend model with model-level options
    `model`: normalising on the device is off for it (`test_gemma3_scoped_request_option`
    checks), which keeps `do_normalize` and `do_rescale` out of the merge."""
    from vllm.config.multimodal import MultiModalConfig

    return MultiModalConfig(mm_processor_kwargs=dict(model), mm_device_do_normalize=False)


def model_config(model: dict[str, Any]) -> Any:
    """Just what the option merging reads of a `ModelConfig`: its multimodal config."""
    config = mm_config(model)
    return SimpleNamespace(get_multimodal_config=lambda: config)


def vllm_call_options(model: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """What `call_hf_processor` calls the processor with (all of it: a processor's `__call__`
    takes `**kwargs`), and the backend's row count with `request={}`."""
    from vllm.multimodal.processing.context import InputProcessingContext

    ctx = SimpleNamespace(model_config=model_config(model))
    return InputProcessingContext.get_merged_mm_kwargs(ctx, request)


def vllm_construction_options(model: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """What `get_hf_processor(**request)` hands `cached_get_processor_without_dynamic_kwargs`
    (which sets the options the processor's `__call__` takes aside)."""
    from transformers.processing_utils import ProcessorMixin
    from vllm.transformers_utils.processor import _merge_mm_kwargs

    merged = vllm_call_options(model, request)
    merged.pop("tokenizer", None)
    return _merge_mm_kwargs(model_config(model), ProcessorMixin, **merged)


@settings(DEV)
@given(OPTIONS, OPTIONS)
def test_merge_is_vllms(model: dict[str, Any], request: dict[str, Any]) -> None:
    assert merge_options(model, request, profile=profile()) == \
        mm_config(model).merge_mm_processor_kwargs(request)


@settings(DEV)
@given(OPTIONS)
def test_resolve_is_vllms(options: dict[str, Any]) -> None:
    if not profile().has(OPTION_SCOPES):
        assert resolve_scopes(options, profile=profile()) == options
        return
    from vllm.multimodal.processing.context import _resolve_mm_processor_kwargs

    assert resolve_scopes(options, profile=profile()) == _resolve_mm_processor_kwargs(options)


@settings(DEV)
@given(OPTIONS, OPTIONS)
def test_call_options_are_vllms(model: dict[str, Any], request: dict[str, Any]) -> None:
    assert call_options(model, request, profile=profile()) == vllm_call_options(model, request)
    assert call_options(model, {}, profile=profile()) == vllm_call_options(model, {})


@settings(DEV)
@given(OPTIONS, OPTIONS)
def test_construction_options_are_vllms(model: dict[str, Any], request: dict[str, Any]) -> None:
    assert construction_options(model, request, profile=profile()) == \
        vllm_construction_options(model, request)


@settings(DEV)
@given(OPTIONS, OPTIONS, st.fixed_dictionaries({}, optional={"do_sample_frames": st.booleans()}))
def test_offsets_call_options_are_the_backends(model: dict[str, Any], request: dict[str, Any],
                                               added: dict[str, Any]) -> None:
    """The Offsets path's call: the backend adds untruncated text and the videos'
    `do_sample_frames` below the request's options, and the context merges all over the
    model's. (0.31.0, without video metadata, is impl's own order: truncation last.)"""
    from impl.pipeline import ModelLevel, offsets_call_options

    if not profile().has(OPTION_SCOPES):
        pytest.skip("impl keeps 0.31.0's own order of the call's options")
    mine = offsets_call_options(ModelLevel(None, model), {}, request, added, profile=profile())
    assert mine == vllm_call_options(model, {**added, "truncation": False, **request})


def test_the_readme_example() -> None:
    """The example of vLLM's `_merge_mm_processor_kwargs` docstring, as impl merges it."""
    from impl.release import profile_for

    model = {"size": {"shortest_edge": 256},
             "videos_kwargs": {"size": {"longest_edge": 1024}, "num_frames": 16}}
    request = {"size": {"shortest_edge": 512}, "videos_kwargs": {"fps": 4}}
    merged = merge_options(model, request, profile=profile_for("0.32.0"))
    assert merged == {"size": {"shortest_edge": 512},
                      "videos_kwargs": {"size": {"shortest_edge": 512, "longest_edge": 1024},
                                        "num_frames": 16, "fps": 4}}
    assert resolve_scopes(merged, profile=profile_for("0.32.0")) == {
        "videos_kwargs": merged["videos_kwargs"]}
    assert merge_options(model, request) == {**model, **request}  # 0.31.0


# --- end to end: Gemma3, pan and scan off for the model and on in a request -------------------

MODEL = {"do_pan_and_scan": False}
REQUEST = {"images_kwargs": {"do_pan_and_scan": True, "pan_and_scan_min_crop_size": 32,
                             "pan_and_scan_max_num_crops": 2,
                             "pan_and_scan_min_ratio_to_activate": 1.2}}


def backend_and_path() -> tuple[Any, str]:
    import transformers

    from conformance.subjects import vllm as oracle
    from fixtures.build import build_fixture
    from fixtures.registry import get_recipe

    if not get_recipe("gemma3").supports(transformers.__version__):
        pytest.skip(f"gemma3 is not in transformers {transformers.__version__}")
    path = str(build_fixture("gemma3"))
    return oracle.create_processor(path, "transformers", {"image": 1},
                                   options=tuple(MODEL.items())), path


@pytest.mark.parametrize("size", [(64, 64), (400, 100)], ids=["square", "wide"])
def test_gemma3_scoped_request_option(size: tuple[int, int]) -> None:
    """The flat model option and the request's scoped one: on 0.31.0 both reach the HF
    processor, which refuses them (ValueError, in the backend and impl alike); from 0.32.0 the
    scoped one wins. A square image is then processed uncropped; a wide one is cropped,
    which the backend cannot attribute to the image (its rows are counted with the model's
    options: ValueError, in impl too)."""
    from PIL import Image

    import impl
    from conformance.subjects.vllm import apply, from_vllm_output
    from impl.hf import load_processor

    backend, path = backend_and_path()
    assert not backend.info.ctx.model_config.get_multimodal_config().mm_device_do_normalize
    prompt = "Look: <start_of_image> here."
    data = {"image": [Image.new("RGB", size, "green")]}
    theirs = outcome(lambda: from_vllm_output(apply(backend, prompt, data, None, REQUEST)))
    processor = load_processor(path, MODEL)
    built = load_processor(path, construction_options(MODEL, REQUEST, profile=profile()))
    mine = outcome(lambda: impl.process(processor, prompt, data, processor_kwargs=MODEL,
                                        request_kwargs=REQUEST, request_processor=built,
                                        dtype=backend.info.ctx.model_config.dtype,
                                        profile=profile()))
    if isinstance(theirs, type):
        assert mine is theirs, f"the backend raised {theirs.__name__}, impl gave {mine}"
        if profile().has(OPTION_SCOPES) and size == (64, 64):
            pytest.fail("the backend refused the scoped option")
        return
    assert not isinstance(mine, type), f"impl raised {mine.__name__}"
    assert profile().has(OPTION_SCOPES)
    assert mine.prompt_ids == theirs.prompt_ids
    assert mine.placeholders == theirs.placeholders
    assert set(mine.item_fields) == set(theirs.item_fields)
    for modality, items in theirs.item_fields.items():
        for expected, actual in zip(items, mine.item_fields[modality], strict=True):
            assert set(actual) == set(expected)
            for key, value in expected.items():
                assert same_value(value, actual[key]), f"{modality}.{key} differs"
