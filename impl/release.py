"""Release profiles: which vLLM release's backend behaviour impl reproduces.

The backend changed what it computes between releases. Each change is a `Step` here, with the
release it landed in and the backend code it changed, the way `impl.version` models the
transformers version the placeholder strategy turns on. A `Profile` is the set of steps a vLLM
release has: every step landed in it or before. impl's functions take a profile (default: the
first release impl reproduced, 0.31.0) and branch on `profile.has(STEP)`, so each branch names
the step it reproduces.

Steps are read off the backend's `model_executor/models/transformers/multimodal.py` of each
release (0.31.0 -> 0.32.0 -> 0.33.0; 0.34.0 left that file as 0.33.0 had it), and off the
shared processing its calls go through (`OPTION_SCOPES`: how processor options are merged).
Checked against the backend itself by tests/impl/test_equivalence_vllm.py on the vLLMs of the
default axis.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from impl.version import parse_version

FIRST_RELEASE = "0.31.0"  # the oldest backend impl reproduces


@dataclass(frozen=True)
class Step:
    """One change of the backend's behaviour: `name`, the release it landed in (`since`),
    what it changed (`statement`) and where (`traces`: the backend's names)."""

    name: str
    since: str
    statement: str
    traces: str


OFFSETS_ONLY = Step(
    "offsets-only", "0.32.0",
    "The Legacy path is gone: on every transformers version placeholders come from "
    "`text_replacement_offsets`; a processor that reports none is an error.",
    "LegacyMultiModalProcessor removed; MultiModalProcessor is the Offsets one")
IMAGE_BUDGET = Step(
    "image-budget", "0.32.0",
    "The largest image (max image tokens, the dummy image) is the smallest of the image "
    "processor's `size` candidates and 10000x10000 with the most tokens, halved while the "
    "count holds.",
    "MultiModalProcessingInfo.get_image_size_with_most_features, _get_size_candidates, "
    "_get_size_with_most_tokens")
VIDEO = Step(
    "video", "0.32.0",
    "Video is a modality where the processor has a video processor that counts video tokens "
    "(transformers >= 5.18.0): its placeholder, fields (`video_grid_thw` routed to video, "
    "`second_per_grid_ts`), per-video counts, profiling size and frames, and encoder.",
    "MultiModalProcessingInfo._is_video_model, get_max_video_tokens, "
    "MultiModalProcessor._get_hf_mm_inputs, _get_field_config, _process_video_input")
FEATURES_DICT = Step(
    "features-return-dict", "0.32.0",
    "Encoders are asked `get_<modality>_features(..., return_dict=True)` and their "
    "`pooler_output` taken.",
    "MultiModalMixin._get_features")
MROPE_EMBED_TYPES = Step(
    "mrope-embed-types", "0.32.0",
    "M-RoPE token types mark only a placeholder's embedding positions; video grids and "
    "`second_per_grid_ts` reach `get_rope_index`; only audio lengths are refused.",
    "MultiModalMixin.get_mrope_input_positions")
BATCH_ROWS = Step(
    "encoder-batch-rows", "0.33.0",
    "An encoder returning one entry per batch row rather than per item (transformers >= "
    "5.20.1) has its entries joined and cut by the items' patch counts.",
    "MultiModalMixin._process_vision_input")

OPTION_SCOPES = Step(
    "option-scopes", "0.32.0",
    "A request's processor options are merged over the model's key by key, each kwargs group "
    "(`images_kwargs`, ...) on its own, nested mappings within, in the order model flat < "
    "model group < request flat < request group; a flat option a group also holds is then "
    "left out of what the processor is called with.",
    "vllm.config.multimodal._merge_mm_processor_kwargs (MultiModalConfig."
    "merge_mm_processor_kwargs), vllm.multimodal.processing.context."
    "_resolve_mm_processor_kwargs (InputProcessingContext.get_merged_mm_kwargs)")

STEPS = (OFFSETS_ONLY, IMAGE_BUDGET, VIDEO, FEATURES_DICT, MROPE_EMBED_TYPES, BATCH_ROWS,
         OPTION_SCOPES)


@dataclass(frozen=True)
class Profile:
    """The behaviour of one vLLM release's backend: the steps landed by `release`."""

    release: str
    steps: frozenset[str]

    def has(self, step: Step) -> bool:
        return step.name in self.steps

    @property
    def name(self) -> str:
        """The release whose behaviour this is: the newest release a step landed in."""
        landed = [s.since for s in STEPS if s.name in self.steps]
        return max([FIRST_RELEASE, *landed], key=parse_version)


@lru_cache(maxsize=32)
def profile_for(vllm_version: str) -> Profile:
    """The profile of a vLLM version (a pre-release of X.Y.Z counts as X.Y.Z: its steps are
    those of its release). Older than the first release impl reproduces: ValueError."""
    version = parse_version(vllm_version)
    base = parse_version(version.base_version)
    if base < parse_version(FIRST_RELEASE):
        raise ValueError(f"vLLM {vllm_version} is older than {FIRST_RELEASE}, the first "
                         "release whose backend impl reproduces")
    steps = frozenset(s.name for s in STEPS if parse_version(s.since) <= base)
    return Profile(str(base), steps)


DEFAULT = profile_for(FIRST_RELEASE)
"""What impl's functions follow when given no profile."""
