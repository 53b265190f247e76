"""A case is data: a fixture, a prompt made of text segments around placeholders, and media specs.

Cases serialise to JSON, so a failing one can be written into a standalone reproducer.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

SAMPLING_RATE = 16000


@dataclass(frozen=True)
class Media:
    """One item: an image of (height, width) or an audio of `samples`, filled from `seed`."""

    modality: str
    height: int = 0
    width: int = 0
    samples: int = 0
    seed: int = 0

    def materialise(self) -> Any:
        return _materialise(self)

    def describe(self) -> str:
        if self.modality == "image":
            return f"image {self.height}x{self.width} (seed {self.seed})"
        return f"audio {self.samples / SAMPLING_RATE:.3f} s (seed {self.seed})"


@functools.lru_cache(maxsize=256)
def _materialise(media: Media) -> Any:
    """The same object for the same spec: checks process one item many times (alone, in
    batches, reordered); processors do not modify their inputs."""
    rng = np.random.RandomState(media.seed)
    if media.modality == "image":
        from PIL import Image

        pixels = rng.randint(0, 256, (media.height, media.width, 3), dtype=np.uint8)
        return Image.fromarray(pixels)
    if media.modality == "audio":
        return rng.uniform(-0.5, 0.5, media.samples).astype(np.float32)
    raise ValueError(f"no media of modality {media.modality!r}")


@dataclass(frozen=True)
class Case:
    fixture: str
    modality: str
    segments: tuple[str, ...]  # text around placeholders: len(segments) - 1 placeholders
    media: tuple[Media, ...]
    processor_kwargs: tuple[tuple[str, Any], ...] = field(default=())
    placeholder: str | None = None  # overrides the recipe's placeholder text

    @property
    def num_placeholders(self) -> int:
        return len(self.segments) - 1

    def prompt(self, placeholder: str) -> str:
        return (self.placeholder or placeholder).join(self.segments)

    def items(self) -> list[Any]:
        return [m.materialise() for m in self.media]

    def mm_data(self) -> dict[str, list]:
        """vLLM's form: audios carry their sampling rate."""
        items = self.items()
        if self.modality == "audio":
            return {"audio": [(a, SAMPLING_RATE) for a in items]}
        return {self.modality: items}

    def with_media(self, media: tuple[Media, ...]) -> Case:
        return replace(self, media=media)

    def single(self, index: int) -> Case:
        """Item `index` alone, in a one-placeholder prompt."""
        return replace(self, segments=("", ""), media=(self.media[index],))

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Case:
        raw = json.loads(text)
        raw["segments"] = tuple(raw["segments"])
        raw["media"] = tuple(Media(**m) for m in raw["media"])
        raw["processor_kwargs"] = tuple(tuple(kv) for kv in raw["processor_kwargs"])
        return cls(**raw)

    def describe(self) -> str:
        media = ", ".join(m.describe() for m in self.media)
        options = "".join(f", {k}={v!r}" for k, v in self.processor_kwargs)
        return f"{self.fixture}: prompt {self.segments!r} with [{media}]{options}"
