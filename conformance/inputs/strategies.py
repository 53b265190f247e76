"""Hypothesis strategies for cases: small generators that compose.

Prompts interleave text and placeholders (adjacent ones too, at the start and at the end);
images vary in size and aspect ratio (tiny, extreme, larger than the resize target); audios
vary in length; videos (where the suite draws them) in frames and frame size; batches vary in
size and order.
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from conformance.core.settings import current
from conformance.inputs.cases import Case
from conformance.inputs.forms import OTHER_FORMS, frozen_options
from conformance.inputs.media import SAMPLING_RATE, Media
from fixtures.recipe import Recipe

TEXT_PIECES = ("", " ", "\n", "Describe", " this", "?", " and", "\n\n", "The cat.", " 12")
MAX_ITEMS = 3

# Sides and lengths every recipe's processor accepts.
IMAGE_SIDES = (16, 400)
MAX_ASPECT = 8.0
AUDIO_SECONDS = (0.1, 3.0)


def audio_samples(rate: int) -> tuple[int, int]:
    """The fewest and most samples of a drawn audio at `rate` Hz."""
    return int(AUDIO_SECONDS[0] * rate), int(AUDIO_SECONDS[1] * rate)


AUDIO_SAMPLES = audio_samples(SAMPLING_RATE)
# Videos stay small (every frame goes through the processor). At least two frames: processors
# grouping frames in pairs (temporal_patch_size 2) take no fewer (Qwen3-VL's and GLM-4V's
# raise 't:1 must be larger than temporal_factor:2', natively too; vLLM's backend sizes its
# dummy video the same way); an odd count, which they pad, is drawn.
VIDEO_FRAMES = (2, 4)
VIDEO_SIDES = (16, 96)

# Every phase but `explain`: it re-runs an already shrunk failure many times to annotate which
# parts of the case matter, most of a failing cell's time, and the reproducer says it better.
PHASES = tuple(p for p in Phase if p is not Phase.explain)
# max_examples counts cases per search (default options, then option sets) that were not
# rejected: dev's 25 is the floor a pass needs (`run/suite.py`, MIN_COMPARED). No profile keeps
# an example database: a search's cases are its seed's alone.
settings.register_profile("dev", max_examples=25, deadline=None, derandomize=True,
                          suppress_health_check=list(HealthCheck), phases=PHASES)
settings.register_profile("ci", max_examples=25, deadline=None, database=None,
                          suppress_health_check=list(HealthCheck), phases=PHASES)
settings.register_profile("nightly", max_examples=200, deadline=None, database=None,
                          suppress_health_check=list(HealthCheck), phases=PHASES)
# The profiles whose runs all draw from one fixed seed (`run/suite.py`, SEARCH_SEED): the default
# run and the pull requests' gate, whose verdicts must not move between runs of the same code.
# Any other (nightly) draws a new seed per run, recorded in its results (`--seed` replays it).
FIXED_SEED_PROFILES = ("dev", "ci")
settings.load_profile(current().profile)  # a worker loads its run's again (run/worker.py)


def _no_local_constants() -> None:
    """Draw cases from the strategies and the seed alone.

    Hypothesis (6.13x) also draws literals it finds in the source of every "local" module loaded
    in the process: ours. A cell's cases would then depend on which of our modules ran before
    it in the same worker and on what they say (an edit anywhere reshuffles every search),
    and the same cell could pass alone and fail in a column. Its pool is emptied and kept empty
    (private API, pinned with hypothesis in the lock; tests/conformance/test_strategies.py
    proves the draws no longer depend on what is loaded).
    """
    from hypothesis.internal.conjecture import providers

    providers._get_local_constants = lambda: providers.Constants()


_no_local_constants()


def text_segments(count: int) -> st.SearchStrategy[tuple[str, ...]]:
    """`count` text pieces; empty ones make placeholders adjacent or put them at an end."""
    piece = st.lists(st.sampled_from(TEXT_PIECES), max_size=3).map("".join)
    return st.tuples(*[piece] * count)


@st.composite
def images(draw, recipe: Recipe) -> Media:
    (low, high), max_aspect = IMAGE_SIDES, MAX_ASPECT
    height = draw(st.integers(low, high))
    width_low = max(low, int(height / max_aspect) + 1)
    width_high = min(high, int(height * max_aspect))
    width = draw(st.integers(width_low, max(width_low, width_high)))
    return Media("image", height=height, width=width, seed=draw(st.integers(0, 2**16)))


@st.composite
def audios(draw, recipe: Recipe, rate: int = SAMPLING_RATE) -> Media:
    low, high = audio_samples(rate)
    return Media("audio", samples=draw(st.integers(low, high)),
                 seed=draw(st.integers(0, 2**16)), rate=rate)


@st.composite
def videos(draw, recipe: Recipe) -> Media:
    low, high = VIDEO_SIDES
    return Media("video", height=draw(st.integers(low, high)),
                 width=draw(st.integers(low, high)), frames=draw(st.integers(*VIDEO_FRAMES)),
                 seed=draw(st.integers(0, 2**16)))


def companion(modality: str, seed: int) -> Media:
    """The small item of `modality` a mixed case places beside a drawn case's items (not
    drawn: the draws stay those of before), its content from the case's `seed`."""
    if modality == "audio":
        return Media("audio", samples=AUDIO_SAMPLES[0], seed=seed)
    if modality == "video":
        return Media("video", height=2 * VIDEO_SIDES[0], width=2 * VIDEO_SIDES[0],
                     frames=VIDEO_FRAMES[0], seed=seed)
    return Media(modality, height=2 * IMAGE_SIDES[0], width=3 * IMAGE_SIDES[0], seed=seed)


def media(recipe: Recipe, modality: str, rate: int = SAMPLING_RATE) -> st.SearchStrategy[Media]:
    """Items of `modality` (audio at `rate` Hz, the checkpoint's: `media.audio_rate`)."""
    if modality == "audio":
        return audios(recipe, rate)
    return {"image": images, "video": videos}[modality](recipe)


def processor_options(recipe: Recipe) -> st.SearchStrategy[tuple[tuple[str, object], ...]]:
    """One of the architecture's option sets a deployment might configure
    (`Recipe.processor_options`: {option: value} sets)."""
    variants = [frozen_options(v) for v in recipe.processor_options]
    return st.sampled_from(variants) if variants else st.just(())


@st.composite
def cases(draw, recipe: Recipe, max_items: int = MAX_ITEMS, with_options: bool = False,
          video: bool = False, rate: int = SAMPLING_RATE) -> Case:
    """A case of the recipe; `with_options`: under one of its processor option sets, also given
    in one of the other forms vLLM takes (`Case.option_form`, drawn last); `video`:
    video items may be drawn too (the suite says so where the subject takes them). Without
    video the draws are exactly those of the recipe's modalities alone."""
    modalities = recipe.modalities + (("video",) if video else ())
    modality = draw(st.sampled_from(modalities))
    count = draw(st.integers(1, min(max_items, recipe.max_items)))
    items = draw(st.lists(media(recipe, modality, rate), min_size=count, max_size=count))
    segments = draw(text_segments(count + 1))
    options = draw(processor_options(recipe)) if with_options else ()
    return Case(recipe.name, modality, segments, tuple(items), options,
                option_form=draw(st.sampled_from(OTHER_FORMS)) if options else "")
