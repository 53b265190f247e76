"""What every check receives and returns."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from impl.types import Placeholder, ProcessedPrompt


@dataclass
class Outcome:
    ok: bool
    evidence: str = ""  # the first difference, stated precisely; empty when ok
    measured: dict = field(default_factory=dict)


PASS = Outcome(True)


class OracleFailed(RuntimeError):
    """An oracle could not process a valid case: the case says nothing about the subject."""


@dataclass
class Context:
    """One fixture on the installed transformers version: the subject and its oracles."""

    fixture: str
    path: str
    recipe: Any
    subject: Any
    oracles: dict[str, Any]  # "vllm-native" (absent without a native model) and "hf"
    _memo: dict = field(default_factory=dict)

    def oracle_output(self, name: str, case: Any) -> ProcessedPrompt:
        key = (name, case)
        if key not in self._memo:
            try:
                self._memo[key] = self.oracles[name].process(case)
            except Exception as error:
                raise OracleFailed(f"{name}: {type(error).__name__}: {error}") from error
        return self._memo[key]

    @functools.cached_property
    def strategy(self) -> str:
        import transformers

        from conformance.versions import placeholder_strategy

        return placeholder_strategy(transformers.__version__)


def describe(p: Placeholder) -> str:
    embeds = "all" if len(p.embed_positions) == p.length else f"{len(p.embed_positions)}"
    return f"offset={p.offset} length={p.length} embeds={embeds}"


def ids_difference(expected: tuple[int, ...], actual: tuple[int, ...]) -> str | None:
    if expected == actual:
        return None
    pairs = enumerate(zip(expected, actual, strict=False))
    index = next((i for i, (x, y) in pairs if x != y), min(len(expected), len(actual)))
    return (f"prompt ids differ at position {index}: expected {list(expected[index:index + 6])} "
            f"got {list(actual[index:index + 6])} (lengths {len(expected)} vs {len(actual)})")


def placeholders_difference(expected: ProcessedPrompt, actual: ProcessedPrompt) -> str | None:
    for modality in sorted(set(expected.placeholders) | set(actual.placeholders)):
        mine = expected.placeholders.get(modality, ())
        theirs = actual.placeholders.get(modality, ())
        if len(mine) != len(theirs):
            return f"{modality}: expected {len(mine)} placeholders, got {len(theirs)}"
        for index, (x, y) in enumerate(zip(mine, theirs, strict=True)):
            if (x.offset, x.length) != (y.offset, y.length):
                return f"{modality} item {index}: expected {describe(x)}, got {describe(y)}"
            if x.embed_positions != y.embed_positions:
                missing = sorted(set(x.embed_positions) - set(y.embed_positions))[:5]
                extra = sorted(set(y.embed_positions) - set(x.embed_positions))[:5]
                return (f"{modality} item {index}: embedding positions differ ({describe(x)} vs "
                        f"{describe(y)}): missing {missing}, unexpected {extra}")
    return None
