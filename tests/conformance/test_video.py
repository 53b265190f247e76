"""Video items: the media generator makes them from a seed, one decision says which vLLM's
backend takes them (the backend's own answer, inside the release's transformers window), and
only suites whose subject takes them draw them; without video the draws are those of before.
No model runs."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, seed, settings

from conformance.core import vllms
from conformance.core.settings import current, use
from conformance.inputs.cases import Case
from conformance.inputs.media import VIDEO_FPS, Media, make_media, mm_data
from conformance.inputs.strategies import VIDEO_FRAMES, VIDEO_SIDES, cases
from conformance.run.suite import SEARCH_SEED, Search
from conformance.subjects.context import Context
from conformance.subjects.hf import video_inputs
from conformance.subjects.impl import ImplSubject
from conformance.subjects.vllm import BACKEND, VllmSubject, backend_takes_video
from fixtures.registry import available_recipes, get_recipe

# GLM-4V takes video too, not drawn yet (fixtures/recipes/glm4v.py says why)
VIDEO_FIXTURES = {"qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "llava_onevision",
                  "llava_next_video", "video_llava", "cosmos3_omni"}  # takes video; the backend
# counts none of it (llava_next_video, video_llava: their recipes; cosmos3_omni: Qwen3-VL's)


def test_a_video_is_its_frames_made_from_the_seed():
    spec = Media("video", height=20, width=30, frames=3, seed=7)
    frames = spec.materialise()
    assert frames.shape == (3, 20, 30, 3) and frames.dtype == np.uint8
    assert np.array_equal(frames, make_media("video", 20, 30, 0, 7, 3))  # no cache behind it
    assert not np.array_equal(frames, Media("video", height=20, width=30, frames=3,
                                            seed=8).materialise())
    assert spec.describe() == "video 3x20x30 (seed 7)"


def test_vllm_gets_each_video_with_the_metadata_of_every_frame_kept():
    frames = Media("video", height=16, width=16, frames=4, seed=0).materialise()
    (video, metadata), = mm_data("video", [frames])["video"]
    assert video is frames
    assert metadata["total_num_frames"] == 4 and metadata["frames_indices"] == [0, 1, 2, 3]
    assert metadata["fps"] == VIDEO_FPS and metadata["duration"] == 4 / VIDEO_FPS
    assert metadata["do_sample_frames"] is False


def test_a_video_case_round_trips_through_json():
    case = Case("qwen2_vl", "video", ("a ", " b"), (Media("video", 16, 24, frames=2, seed=3),))
    assert Case.from_json(case.to_json()) == case


@pytest.mark.parametrize(("label", "transformers", "comparable"), [
    ("0.31.0", "5.17.0", True),  # inside its window (its backend then says it takes none)
    ("0.31.0", "5.19.0", False),  # above it: native vLLM, the oracle, may take none
    ("0.32.0", "5.19.0", True),
    ("0.32.0", "5.24.0", False),
    ("0.32.1@vllm-src", "5.19.0", True),  # a folder of 0.32.x, as its release
    ("0.40.0", "5.19.0", False),  # an unknown label
])
def test_video_is_compared_only_inside_the_release_window(label, transformers, comparable):
    # the windows come from each release's metadata (tests/test_vllms.py)
    assert vllms.video_comparable(label, transformers) is comparable


@pytest.mark.vllm
def test_vllm_0_31_backend_reports_no_video_for_a_video_architecture():
    # asked of the backend itself (its processing info's supported modalities), not written
    # down per release; vLLM 0.32.0's answer on 5.19.0 ("video") is what the slow
    # tests/conformance/test_mixed.py run on its environment draws videos from
    from conformance.subjects.context import fixture_path
    from conformance.subjects.vllm import backend_modalities

    assert backend_modalities(str(fixture_path("qwen2_vl"))) == frozenset({"image"})
    assert backend_modalities("/nowhere") == frozenset()  # no backend: the cells say why


def test_the_fixtures_that_take_video_are_the_video_architectures():
    takes = {name for name in available_recipes() if get_recipe(name).takes_video}
    assert takes == VIDEO_FIXTURES


@pytest.mark.parametrize(("label", "version", "fixture", "reports", "takes"), [
    ("0.32.0", "5.19.0", "qwen2_vl", {"image", "video"}, True),
    ("0.32.0", "5.17.0", "qwen2_vl", {"image"}, False),  # what 0.32.0's backend says below 5.18
    ("0.32.0", "5.24.0", "qwen2_vl", {"image", "video"}, False),  # above the window
    ("0.32.0", "5.19.0", "llava", {"image", "video"}, False),  # the architecture takes none
])
def test_only_the_backend_draws_video_and_only_where_it_takes_it(monkeypatch, label, version,
                                                                 fixture, reports, takes):
    import transformers

    from conformance.subjects import vllm as adapter

    use(current().but(vllm=label))  # tests/conftest.py restores the settings
    monkeypatch.setattr(transformers, "__version__", version)
    monkeypatch.setattr(adapter, "backend_modalities", lambda path: frozenset(reports))
    recipe = get_recipe(fixture)
    assert backend_takes_video(recipe, "/nowhere") is takes
    backend = VllmSubject("vllm-backend", BACKEND, "/nowhere", recipe)
    assert backend.modalities == recipe.modalities + (("video",) if takes else ())
    for subject, video in ((backend, takes), (ImplSubject("/nowhere", recipe), False)):
        assert Context(fixture, "/nowhere", recipe, subject, {}).video is video


def drawn(recipe, **options) -> list[Case]:
    found: list[Case] = []

    @settings(max_examples=30, database=None)
    @seed(SEARCH_SEED)
    @given(cases(recipe, **options))
    def collect(case):
        found.append(case)

    collect()
    return found


def test_without_video_the_draws_are_those_of_before():
    recipe = get_recipe("qwen2_vl")
    assert drawn(recipe) == drawn(recipe, video=False)
    assert all(case.modality == "image" for case in drawn(recipe))


def test_with_video_small_videos_are_drawn_beside_images():
    found = drawn(get_recipe("llava_onevision"), video=True)
    videos = [m for case in found if case.modality == "video" for m in case.media]
    assert videos and any(case.modality == "image" for case in found)
    assert all(VIDEO_FRAMES[0] <= m.frames <= VIDEO_FRAMES[1] for m in videos)
    assert all(VIDEO_SIDES[0] <= side <= VIDEO_SIDES[1] for m in videos
               for side in (m.height, m.width))


def test_a_search_that_draws_video_but_compared_none_is_inconclusive():
    search = Search(required=("video",))
    search.compared_by_pass["default"] = 8
    search.compared_by_modality["image"] = 8
    assert "no video case compared" in search.shortfall(4, ())
    search.compared_by_modality["video"] = 1
    assert search.shortfall(4, ()) is None


def test_the_hf_oracle_gets_videos_as_the_backend_hands_them():
    case = Case("qwen3_vl", "video", ("", ""), (Media("video", 16, 16, frames=3, seed=0),))
    sampling = SimpleNamespace(video_processor=SimpleNamespace(do_sample_frames=True))
    inputs = video_inputs(sampling, case)
    assert inputs["do_sample_frames"] is False
    assert inputs["video_metadata"][0]["total_num_frames"] == 3
    assert "do_sample_frames" not in inputs["video_metadata"][0]
    plain = video_inputs(SimpleNamespace(video_processor=SimpleNamespace()), case)
    assert list(plain) == ["videos"] and plain["videos"][0].shape == (3, 16, 16, 3)


@pytest.mark.slow
@pytest.mark.parametrize(("version", "video"), [("5.17.0", False), ("5.19.0", True)])
def test_vllm_0_32_backend_reports_video_from_5_18(version, video):
    """The facts the release catalogue once typed in (`video_from="5.18.0"`), asked of vLLM
    0.32.0's backend itself in its environment."""
    import subprocess

    from conformance.run import versions

    release = vllms.releases()["0.32.0"]
    if not release.python.exists():
        pytest.skip("no vLLM 0.32.0 environment: python3 scripts/bootstrap.py env --vllm 0.32.0")
    env = versions.ensure_overlay(version, vllm="0.32.0").environ()
    ask = ("from conformance.subjects.context import fixture_path\n"
           "from conformance.subjects.vllm import backend_modalities\n"
           "print(sorted(backend_modalities(str(fixture_path('qwen2_vl')))))")
    out = subprocess.run([str(release.python), "-c", ask], env=env, capture_output=True,
                         text=True, timeout=900)
    said = out.stdout.strip().splitlines()[-1:] or [out.stderr[-500:]]
    assert said == [str(["image", "video"] if video else ["image"])], said
