"""Media: every image, audio and video the harness feeds a processor, made from a spec and a
seed.

A `Media` spec is data (a case serialises it into a reproducer); `materialise` makes the same
object for the same spec. The checkpoint-level checks use `smoke_media`: items of distinct
sizes, so that swapping two of them changes what the model sees.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from impl.info import audio_sampling_rate

if TYPE_CHECKING:
    from fixtures.recipe import Recipe

# Audio is made at the rate the checkpoint's feature extractor takes (`audio_rate`; this one
# where it names none): vLLM's resampling is not under test (and needs torchaudio, which the
# CPU environment lacks), and the HF reference is fed the same samples as vLLM.
SAMPLING_RATE = 16000
IMAGE_SIZES: tuple[tuple[int, int], ...] = ((40, 60), (64, 32), (50, 50), (30, 90))  # (h, w)
AUDIO_SECONDS: tuple[float, ...] = (1.0, 0.6, 1.4, 0.8)
# A video is its frames, already decoded and sampled: vLLM's `multi_modal_data` gives each with
# the metadata of a decoder that kept every frame (its processor samples none), at this rate.
VIDEO_FPS = 2.0


@dataclass(frozen=True)
class Media:
    """One item: an image of (height, width), an audio of `samples` at `rate` Hz, or a video
    of `frames` frames of (height, width), filled from `seed`."""

    modality: str
    height: int = 0
    width: int = 0
    samples: int = 0
    seed: int = 0
    frames: int = 0
    rate: int = SAMPLING_RATE

    def materialise(self) -> Any:
        return _materialise(self)

    def describe(self) -> str:
        if self.modality == "image":
            return f"image {self.height}x{self.width} (seed {self.seed})"
        if self.modality == "video":
            return f"video {self.frames}x{self.height}x{self.width} (seed {self.seed})"
        rate = "" if self.rate == SAMPLING_RATE else f" at {self.rate} Hz"
        return f"audio {self.samples / self.rate:.3f} s{rate} (seed {self.seed})"


@functools.lru_cache(maxsize=256)
def _materialise(media: Media) -> Any:
    """The same object for the same spec: checks process one item many times (alone, in
    batches, reordered); processors do not modify their inputs."""
    return make_media(media.modality, media.height, media.width, media.samples, media.seed,
                      media.frames)


def make_media(modality: str, height: int, width: int, samples: int, seed: int,
               frames: int = 0) -> Any:
    """An RGB image of height x width, float32 audio of `samples`, or a video of `frames`
    RGB frames of height x width (uint8, frames x height x width x 3), filled from `seed`.

    Self-contained (numpy and PIL only): standalone reproducers embed its source, so they
    rebuild exactly the items the harness fed."""
    import numpy as np

    rng = np.random.RandomState(seed)
    if modality == "image":
        from PIL import Image

        return Image.fromarray(rng.randint(0, 256, (height, width, 3), dtype=np.uint8))
    if modality == "audio":
        return rng.uniform(-0.5, 0.5, samples).astype(np.float32)
    if modality == "video":
        return rng.randint(0, 256, (frames, height, width, 3), dtype=np.uint8)
    raise ValueError(f"no media of modality {modality!r}")


def smoke_media(modality: str, count: int, rate: int = SAMPLING_RATE) -> tuple[Media, ...]:
    """`count` items of distinct sizes (seeds 0, 1, ...): the checkpoint-level checks' inputs
    (audio at `rate` Hz)."""
    if modality == "image":
        return tuple(Media("image", height=h, width=w, seed=i)
                     for i, (h, w) in enumerate(IMAGE_SIZES[:count]))
    if modality == "audio":
        return tuple(Media("audio", samples=int(seconds * rate), seed=i, rate=rate)
                     for i, seconds in enumerate(AUDIO_SECONDS[:count]))
    raise ValueError(f"no media maker for modality {modality!r}")


def make_items(modality: str, count: int, rate: int = SAMPLING_RATE) -> list:
    """The materialised `smoke_media`."""
    return [m.materialise() for m in smoke_media(modality, count, rate)]


def video_metadata(frames: int) -> dict[str, Any]:
    """What vLLM's video loader reports for a video whose every frame was kept, at VIDEO_FPS:
    processors that sample frames read it (vLLM drops it for the others)."""
    return {"fps": VIDEO_FPS, "duration": frames / VIDEO_FPS, "total_num_frames": frames,
            "frames_indices": list(range(frames)), "video_backend": "opencv",
            "do_sample_frames": False}


def mm_data(modality: str, items: Sequence, rate: int = SAMPLING_RATE) -> dict[str, list]:
    """vLLM's `multi_modal_data` form: audios carry their sampling rate (`rate`), videos their
    metadata. No items: no multimodal data at all (a text-only request)."""
    if not items:
        return {}
    if modality == "audio":
        return {"audio": [(item, rate) for item in items]}
    if modality == "video":
        return {"video": [(item, video_metadata(len(item))) for item in items]}
    return {modality: list(items)}


def audio_rate(recipe: Recipe, path: str) -> int:
    """The rate (Hz) to make the recipe's audio at: its checkpoint's feature extractor's
    (SAMPLING_RATE for a checkpoint that takes no audio or names no rate)."""
    if "audio" not in recipe.modalities:
        return SAMPLING_RATE
    return _checkpoint_rate(path)


@functools.lru_cache(maxsize=64)
def _checkpoint_rate(path: str) -> int:
    # lazy: impl.hf imports torch (+1.1 s); the subjects package imports this module
    from impl.hf import load_processor

    return int(audio_sampling_rate(load_processor(path, {})))
