"""Known findings' triggers: cases every suite search of their fixture runs before its drawn ones.

A finding seen once in a sample of drawn cases may not be drawn again (paligemma's prompt ids
differ only for a prompt ending in a newline): `examples.toml` gives each finding of the
case-level checks a case that shows it, or says why none is given. `run/suite.py` hands them to
hypothesis as explicit examples, so every run exercises them whatever its seed draws.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path

from conformance.inputs.cases import Case
from conformance.inputs.forms import REQUEST_FLAT, frozen_options
from conformance.inputs.media import Media
from fixtures.recipe import Recipe

EXAMPLES_FILE = Path(__file__).resolve().parent / "examples.toml"


@dataclass(frozen=True)
class Example:
    findings: tuple[str, ...]  # the findings it shows, each where that finding applies
    case: Case
    why: str = ""

    @property
    def options(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.case.processor_kwargs)


@dataclass(frozen=True)
class Examples:
    examples: tuple[Example, ...]
    reasons: dict[str, str]  # finding id -> why it has no example

    def of(self, fixture: str) -> tuple[Example, ...]:
        return tuple(e for e in self.examples if e.case.fixture == fixture)


def parse_example(raw: dict) -> Example:
    unknown = set(raw) - {"fixture", "findings", "why", "modality", "segments", "media",
                          "options", "placeholder", "option_form"}
    if unknown:
        raise ValueError(f"example of {raw.get('fixture')!r}: unknown keys {sorted(unknown)}")
    modality = raw["modality"]
    media = tuple(Media(modality, **spec) for spec in raw["media"])
    options = frozen_options(raw.get("options", {}))  # as strategies draws them
    # the other form its options are given in (`Case.option_form`): per request unless named
    form = raw.get("option_form", REQUEST_FLAT) if options else ""
    case = Case(raw["fixture"], modality, tuple(raw["segments"]), media, options,
                raw.get("placeholder"), form)
    return Example(tuple(raw["findings"]), case, " ".join(raw.get("why", "").split()))


@functools.cache
def load(path: Path = EXAMPLES_FILE) -> Examples:
    with open(path, "rb") as stream:
        raw = tomllib.load(stream)
    reasons = {entry["finding"]: " ".join(entry["reason"].split())
               for entry in raw.get("no_example", [])}
    return Examples(tuple(parse_example(e) for e in raw.get("example", [])), reasons)


def for_search(recipe: Recipe, with_options: bool, video: bool) -> tuple[Case, ...]:
    """The examples one search of `recipe`'s suite runs: those without options in the
    default-options search, those with one of its option sets in the other; video ones only
    where the subject takes video (the search draws it). A contributor's checkpoint gets its
    architecture's fixture's examples (`recipe.name`); a config variant (`llava~full`) its
    base fixture's (the same tokenizer and prompts)."""
    option_sets = [frozen_options(o) for o in recipe.processor_options]
    modalities = (*recipe.modalities, *(("video",) if video else ()))
    chosen = []
    for example in load().of(recipe.name.partition("~")[0]):
        case = example.case
        if bool(case.processor_kwargs) != with_options or case.modality not in modalities:
            continue
        if case.processor_kwargs and case.processor_kwargs not in option_sets:
            continue
        if len(case.media) <= recipe.max_items:
            chosen.append(case)
    return tuple(chosen)
