"""`impl` against the imported vLLM's own Transformers backend, on the same inputs, under the
release profile of that vLLM (impl/release.py): vLLM 0.31.0 in the default environment; the
test command runs this file again under the newest vLLM of the default axis
(`conformance exec --vllm`, scripts/bootstrap.py's impl tier).

Three layers: the tiny llava checkpoint through the in-tree backend processor (offsets, the
strategy transformers 5.17 selects, and on 0.31.0 the legacy class built from the same parts);
fake processors swapped into the backend's processing info, covering audio, mixed and error
cases; and the backend's pure helpers called directly.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import backend_compare as compare
import numpy as np
import pytest
import torch
from backend_compare import (
    assert_same,
    every_fixture,
    outcome,
    run_backend,
    same_value,
    transformers_version,
)
from impl_fakes import (
    BatchDimProcessor,
    CroppingProcessor,
    FakeProcessor,
    FakeTokenizer,
    GridProcessor,
    MaskedAudioProcessor,
    audio,
    make_image,
)

import impl
from impl import encoder, fields, offsets, unpad
from impl.release import DEFAULT, OFFSETS_ONLY, profile_for

vllm = pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm

LIMIT = 3
PROFILE = profile_for(vllm.__version__)  # the behaviour of the imported backend
# the Legacy path is 0.31.0's alone; the Offsets one every release's
STRATEGIES = ("offsets",) if PROFILE.has(OFFSETS_ONLY) else ("offsets", "legacy")


@pytest.fixture(scope="module")
def backend() -> Any:
    from conformance.subjects import vllm as oracle
    from fixtures.build import build_fixture

    path = str(build_fixture("llava"))
    return oracle.create_processor(path, "transformers", {"image": LIMIT})


@pytest.fixture(scope="module")
def mm() -> Any:
    from vllm.model_executor.models.transformers import multimodal

    return multimodal


def backend_class(mm: Any, strategy: str) -> type:
    if strategy == "legacy":
        return mm.LegacyMultiModalProcessor
    # one processor class, the Offsets one, since 0.32.0
    return getattr(mm, "OffsetsMultiModalProcessor", mm.MultiModalProcessor)


def processor_base(mm: Any) -> type:
    """The class holding the processors' shared helpers (0.31.0's base of both, else the one)."""
    return getattr(mm, "_MultiModalProcessorBase", mm.MultiModalProcessor)


def run_impl(processor: Any, prompt: str | list[int], mm_data: dict, **kwargs: Any) -> tuple:
    """impl's output, under the imported backend's profile."""
    return compare.run_impl(processor, prompt, mm_data, profile=PROFILE, **kwargs)


# --- the llava checkpoint ------------------------------------------------------------------


def llava_cases() -> list[tuple[str, str, int]]:
    return [
        ("two images", "USER: <image>\nWhat is in this image? And <image>? ASSISTANT:", 2),
        ("one image", "<image>\nDescribe.", 1),
        ("three, one spare", "<image><image> x <image><image>", 3),
        ("no image", "Just text <image>", 0),
    ]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(("name", "prompt", "count"), llava_cases(), ids=lambda c: str(c))
def test_llava(
    backend: Any, mm: Any, strategy: str, name: str, prompt: str, count: int
) -> None:
    import transformers

    from conformance.inputs.media import make_items

    # what the registry picks for the installed transformers
    assert type(backend) is backend_class(mm, impl.strategy_for(transformers.__version__, PROFILE))
    theirs = backend_class(mm, strategy)(backend.info, backend.dummy_inputs)
    hf = backend.info.get_hf_processor()
    mm_data = {"image": make_items("image", count)} if count else {}
    dtype = backend.info.ctx.model_config.dtype
    for given in (prompt, hf.tokenizer.encode(prompt)):
        expected = outcome(lambda g=given: run_backend(theirs, g, mm_data))
        actual = outcome(
            lambda g=given: run_impl(hf, g, mm_data, strategy=strategy, dtype=dtype)
        )
        if isinstance(expected, type):
            assert actual is expected
        else:
            assert_same(expected, actual)


# --- fake processors swapped into the backend ----------------------------------------------


def fake_cases() -> list[tuple[str, type, dict, str | list[int], dict]]:
    images = [make_image(10, 30, 1), make_image(20, 10, 2)]
    audios = [audio(3), audio(5, 0.25)]
    both = {"image": images, "audio": audios}
    merged = {"tokenizer": FakeTokenizer(pieces=("x<image>",))}
    fake = FakeProcessor
    return [
        ("images", fake, {}, "a<image>b<image>", {"image": images}),
        ("unwrapped images", fake, {"wrap": False}, "<image>, <image>", {"image": images}),
        ("audios", fake, {"image": False, "audio": True}, "x<audio>y<audio>", {"audio": audios}),
        ("equal audios", fake, {"audio": True}, "<audio> <audio>", {"audio": [audio(4)] * 2}),
        ("mixed", fake, {"audio": True}, "hi <audio> x <image> and <image> y <audio>", both),
        ("adjacent audios", fake, {"audio": True}, "<audio><audio>", {"audio": audios}),
        ("too few placeholders", fake, {}, "only <image>", {"image": images}),
        ("no placeholder", fake, {}, "plain", {"image": images[:1]}),
        ("spare placeholder", fake, {}, "<image> <image> <image>", {"image": images}),
        ("merged target", fake, merged, "ax<image>b<image>", {"image": images}),
        ("bare placeholder", fake, {"reject_bare_placeholders": True}, "hi <image>", {}),
        ("missing offsets", fake, {"offsets": False}, "<image>", {"image": images[:1]}),
        ("prompt ids", fake, {}, [0, 1, 1050, 1], {"image": images}),
        ("grid rows", GridProcessor, {}, "<image> and <image>", {"image": images}),
        ("leading batch dim", BatchDimProcessor, {}, "<image><image>", {"image": images}),
        ("cropped rows", CroppingProcessor, {}, "<image><image>", {"image": images}),
        ("masked audio", MaskedAudioProcessor, {"audio": True}, "<audio><image> <audio><image>",
         both),
    ]


def fake_backend(mm: Any, backend: Any, strategy: str, fake: FakeProcessor) -> Any:
    info = mm.MultiModalProcessingInfo(backend.info.ctx)
    info.get_hf_processor = lambda **kwargs: fake
    info.get_tokenizer = lambda: fake.tokenizer
    return backend_class(mm, strategy)(info, mm.MultiModalDummyInputsBuilder(info))


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(
    ("name", "cls", "options", "prompt", "mm_data"),
    fake_cases(),
    ids=[c[0] for c in fake_cases()],
)
def test_fake_processor(
    backend: Any,
    mm: Any,
    strategy: str,
    name: str,
    cls: type,
    options: dict,
    prompt: Any,
    mm_data: dict,
) -> None:
    dtype = backend.info.ctx.model_config.dtype
    config = backend.info.get_hf_config()
    theirs = fake_backend(mm, backend, strategy, cls(**options))
    expected = outcome(lambda: run_backend(theirs, prompt, mm_data))
    mine = cls(**options)
    actual = outcome(
        lambda: run_impl(mine, prompt, mm_data, strategy=strategy, dtype=dtype, config=config)
    )
    if isinstance(expected, type):
        assert actual is expected
    else:
        assert_same(expected, actual)


# --- pure helpers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rows", "sizes"),
    [(5, [2, 3]), (10, [2, 3]), (3, [4, 3]), (7, [2, 3]), (0, [2, 1]), (4, []), (6, [0, 0])],
)
def test_split_embeddings(mm: Any, rows: int, sizes: list[int]) -> None:
    embeddings = torch.arange(rows * 2, dtype=torch.float32).reshape(rows, 2)
    expected = outcome(lambda: mm.MultiModalMixin._split_embeddings(None, embeddings, sizes))
    actual = outcome(lambda: encoder.split_embeddings(embeddings, sizes))
    assert same_value(list(expected), list(actual))


@pytest.mark.parametrize("ids", [[5, 3, 5, 3, 9], [7, 2, 2, 7], [9, 8], [4, 4, 4, 1], [6]])
def test_embed_token(mm: Any, ids: list[int]) -> None:
    assert offsets.embed_token_id(ids) == mm._get_embed_token_id(torch.tensor(ids))


@pytest.mark.parametrize(
    ("shape", "total"), [((5, 3), 5), ((1, 5, 3), 5), ((5, 5), 5), ((5,), 2), ((2, 7, 1), 9)]
)
def test_slice_dim(mm: Any, shape: tuple[int, ...], total: int) -> None:
    data = torch.zeros(shape)
    assert fields.slice_dim(data, total) == processor_base(mm)._get_slice_dim(
        None, data, total
    )


@pytest.mark.parametrize("sizes", [[[4, 8], [6, 5]], [[40, 80], [60, 50]], [[6, 8], [6, 8]]])
def test_unpad_images(mm: Any, sizes: list[list[int]]) -> None:
    from transformers import BatchFeature

    inputs = {"pixel_values": torch.rand(2, 3, 6, 8), "image_sizes": torch.tensor(sizes)}
    theirs = BatchFeature(dict(inputs))
    processor_base(mm)._unpad_images(None, theirs)
    mine = dict(inputs)
    unpad.apply_unpad_images(mine)
    assert same_value(theirs["pixel_values"], mine["pixel_values"])


def test_select_item_kwargs(mm: Any) -> None:
    kwargs = {"grid": torch.tensor([[1], [2]]), "names": ["a", "b"], "flag": True, "x": [1]}
    theirs = mm.MultiModalMixin._select_item_kwargs(None, kwargs, 1, 2)
    mine = encoder.select_item_kwargs(kwargs, 1, 2)
    assert set(theirs) == set(mine)
    assert all(same_value(theirs[k], mine[k]) for k in theirs)


def test_find_encoder_classes(mm: Any) -> None:
    class Vision:
        pass

    class Model:
        def get_encoder(self, modality=None):
            if modality == "audio":
                raise TypeError("no audio")
            return Vision() if modality == "image" else self

    model = Model()
    assert encoder.find_encoder_classes(model) == mm.MultiModalMixin._find_encoder_classes(
        None, model
    )


def test_mrope(mm: Any) -> None:
    from vllm.multimodal.inputs import (
        MultiModalBatchedField,
        MultiModalFeatureSpec,
        MultiModalFieldElem,
        MultiModalKwargsItem,
        PlaceholderRange,
    )

    from impl.mrope import Feature, mrope_input_positions
    from impl.types import Placeholder

    class Model:
        def get_rope_index(self, input_ids, image_grid_thw=None, mm_token_type_ids=None):
            n = input_ids.shape[1]
            types = mm_token_type_ids[0]
            grid = image_grid_thw.sum() if image_grid_thw is not None else 0
            positions = (torch.arange(n) * (types + 1) + grid).expand(3, 1, n)
            return positions, torch.tensor([[int(types.sum())]])

    grids = [torch.tensor([1, 2, 2]), torch.tensor([1, 1, 2])]
    specs, mine = [], []
    for grid, (offset, length) in zip(grids, [(1, 3), (6, 2)], strict=True):
        elem = MultiModalFieldElem(data=grid, field=MultiModalBatchedField())
        specs.append(
            MultiModalFeatureSpec(
                data=MultiModalKwargsItem({"image_grid_thw": elem}),
                modality="image",
                identifier=f"i{offset}",
                mm_position=PlaceholderRange(offset=offset, length=length),
            )
        )
        placeholder = Placeholder(offset, length, tuple(range(offset, offset + length)))
        mine.append(Feature("image", placeholder, {"image_grid_thw": grid}))
    tokens = list(range(10))
    host = SimpleNamespace(model=Model())
    expected = mm.MultiModalMixin.get_mrope_input_positions(host, tokens, specs)
    actual = mrope_input_positions(Model(), tokens, mine, profile=PROFILE)
    assert torch.equal(expected[0], actual[0]) and expected[1] == actual[1]


def test_dummy_text_and_max_tokens(backend: Any, mm: Any) -> None:
    from impl import dummy, info

    hf = backend.info.get_hf_processor()
    assert dummy.dummy_text(hf, {"image": 2}, profile=PROFILE) == \
        backend.dummy_inputs.get_dummy_text({"image": 2})
    assert info.max_image_tokens(hf, profile=PROFILE) == backend.info.get_max_image_tokens()
    assert info.supported_modalities(hf, profile=PROFILE) == \
        backend.info._get_supported_modalities()
    assert np.isclose(info.audio_sampling_rate(hf), backend.info._get_audio_sampling_rate())


def test_the_profile_matters(backend: Any) -> None:
    """impl under another release's profile disagrees with this backend where the two
    profiles' behaviour differs (the largest image it profiles with): the profile, not luck,
    makes the comparisons here pass; a wrong profile is caught."""
    from impl import info

    other = DEFAULT if PROFILE != DEFAULT else profile_for("0.34.0")
    hf = backend.info.get_hf_processor()
    theirs = tuple(backend.info.get_image_size_with_most_features())
    assert info.largest_image_size(hf, profile=PROFILE) == theirs
    assert info.largest_image_size(hf, profile=other) != theirs


# --- every fixture, both strategies --------------------------------------------------------


def fixture_backend(name: str) -> Any:
    """vLLM's backend processor for a fixture; skips where the backend cannot be created (a
    known finding, recorded in conformance/expectations/findings.toml)."""
    from conformance import expectations
    from conformance.subjects import vllm as oracle
    from fixtures.build import build_fixture
    from fixtures.registry import get_recipe

    recipe = get_recipe(name)
    if not recipe.supports(transformers_version()):
        pytest.skip(f"{recipe.architecture} not in transformers {transformers_version()}")
    path = str(build_fixture(name))
    try:
        return recipe, oracle.create_processor(
            path, "transformers", {m: recipe.max_items for m in recipe.modalities})
    except Exception as error:
        from conformance.checks.differences import error_text

        # with its cause: vLLM wraps a processor that cannot load in a message naming none
        known = expectations.explain(name, "processing", transformers_version(),
                                     "vllm-backend", error_text(error))
        if known is None:
            raise
        pytest.xfail(known.id)  # the finding id: one line in the summary


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("name", every_fixture())
def test_every_fixture(mm: Any, name: str, strategy: str) -> None:
    """The recipe's own prompt with its items, and one item alone: impl and the backend give
    the same ids, placeholders and per-item fields, or raise the same exception type."""
    from conformance.checks.processing import smoke_case

    recipe, backend = fixture_backend(name)
    theirs = backend_class(mm, strategy)(backend.info, backend.dummy_inputs)
    hf = backend.info.get_hf_processor()
    config = backend.info.get_hf_config()
    dtype = backend.info.ctx.model_config.dtype
    case = smoke_case(recipe, backend.info.ctx.model_config.model)
    for each in (case, case.single(0)):
        prompt = each.prompt(recipe.placeholder[each.modality])
        expected = outcome(lambda p=prompt, e=each: run_backend(theirs, p, e.mm_data()))
        actual = outcome(lambda p=prompt, e=each: run_impl(
            hf, p, e.mm_data(), strategy=strategy, dtype=dtype, config=config))
        if isinstance(expected, type):
            assert actual is expected, f"backend raised {expected.__name__}, impl gave {actual}"
        else:
            assert not isinstance(actual, type), f"impl raised {actual.__name__}"
            assert_same(expected, actual)
