"""A case is data: a fixture, a prompt of text segments around placeholders, and media specs.

A drawn case holds items of one modality (`modality`); a mixed case (`with_companions`) also
holds items of others, each placeholder written for its own item's modality. Cases serialise
to JSON, so a failing one can be written into a standalone reproducer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from conformance.inputs.forms import freeze
from conformance.inputs.media import SAMPLING_RATE, Media, mm_data


@dataclass(frozen=True)
class Case:
    fixture: str
    modality: str
    segments: tuple[str, ...]  # text around placeholders: len(segments) - 1 placeholders
    media: tuple[Media, ...]
    processor_kwargs: tuple[tuple[str, Any], ...] = field(default=())
    placeholder: str | None = None  # overrides the recipe's placeholder text
    # The form the `option forms` sub-property gives its options in besides model-flat
    # (`conformance.inputs.forms`); "" without options
    option_form: str = ""

    @property
    def num_placeholders(self) -> int:
        return len(self.segments) - 1

    @property
    def modalities(self) -> tuple[str, ...]:
        """The modalities of its items, in order of first appearance (its own when it has none)."""
        return tuple(dict.fromkeys(m.modality for m in self.media)) or (self.modality,)

    def prompt(self, placeholder: str | Mapping[str, str]) -> str:
        """The text: `placeholder` is one text for every slot, or the text per modality (each
        slot then gets its item's, a slot beyond the items the case's modality's)."""
        if self.placeholder or isinstance(placeholder, str):
            return (self.placeholder or placeholder).join(self.segments)
        slots = [placeholder[m.modality] for m in self.media][:self.num_placeholders]
        slots += [placeholder[self.modality]] * (self.num_placeholders - len(slots))
        return "".join(s + t for s, t in zip(self.segments, [*slots, ""], strict=True))

    def items(self) -> list[Any]:
        return [m.materialise() for m in self.media]

    def mm_data(self) -> dict[str, list]:
        """vLLM's form, per modality: audios carry their sampling rate (their specs')."""
        rate = next((m.rate for m in self.media if m.modality == "audio"), SAMPLING_RATE)
        if len(self.modalities) == 1:
            return mm_data(self.modality, self.items(), rate)
        return {modality: mm_data(modality, [m.materialise() for m in self.media
                                             if m.modality == modality], rate)[modality]
                for modality in self.modalities}

    def with_companions(self, companions: tuple[Media, ...]) -> Case:
        """A mixed case: `companions` (items of other modalities) placed before the case's own
        items, each placeholder after the first text segment separated by a space."""
        segments = (self.segments[0], *[" "] * len(companions), *self.segments[1:])
        return replace(self, segments=segments, media=(*companions, *self.media))

    def of_modality(self, modality: str) -> Case:
        """Its items of `modality` alone, in a prompt of their placeholders only."""
        media = tuple(m for m in self.media if m.modality == modality)
        return replace(self, modality=modality, segments=("",) * (len(media) + 1), media=media)

    def with_media(self, media: tuple[Media, ...]) -> Case:
        return replace(self, media=media)

    def single(self, index: int) -> Case:
        """Item `index` alone, in a one-placeholder prompt."""
        return replace(self, segments=("", ""), media=(self.media[index],))

    def to_json(self) -> str:
        raw = asdict(self)
        for media in raw["media"]:  # the default rate is left out: those cases read as before
            if media["rate"] == SAMPLING_RATE:
                del media["rate"]
        if not raw["option_form"]:  # as is the default form: those cases read as before
            del raw["option_form"]
        return json.dumps(raw, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Case:
        raw = json.loads(text)
        raw["segments"] = tuple(raw["segments"])
        raw["media"] = tuple(Media(**m) for m in raw["media"])
        raw["processor_kwargs"] = tuple((k, freeze(v)) for k, v in raw["processor_kwargs"])
        return cls(**raw)

    def describe(self) -> str:
        media = ", ".join(m.describe() for m in self.media)
        options = "".join(f", {k}={v!r}" for k, v in self.processor_kwargs)
        if self.option_form:
            options += f" (also {self.option_form})"
        return f"{self.fixture}: prompt {self.segments!r} with [{media}]{options}"
