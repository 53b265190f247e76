"""A case is data: a fixture, a prompt of text segments around placeholders, and media specs.

Cases serialise to JSON, so a failing one can be written into a standalone reproducer.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from conformance.inputs.media import Media, mm_data


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
        return mm_data(self.modality, self.items())

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
