"""Build a check context: a fixture's (or any checkpoint's) subject and its oracles."""

from __future__ import annotations

import functools
from typing import Any

from conformance.checks.base import Context
from conformance.subjects import make_subject


@functools.lru_cache(maxsize=32)
def fixture_path(name: str) -> str:
    from fixtures.build import build_fixture

    return str(build_fixture(name))


_ORACLES: dict[tuple[str, str], dict] = {}


def _oracles(path: str, recipe: Any) -> dict:
    """Shared by every subject and check on the same checkpoint (their outputs are memoised)."""
    key = (path, recipe.name)
    if key not in _ORACLES:
        names = ("vllm-native", "hf") if recipe.native_in_vllm else ("hf",)
        _ORACLES[key] = {name: make_subject(name, path, recipe) for name in names}
    return _ORACLES[key]


_SUBJECTS: dict[tuple[str, str, str, str | None], Any] = {}
_MEMOS: dict[tuple[str, str], dict] = {}


def _subject(path: str, recipe: Any, name: str, fault: str | None) -> Any:
    """One per checkpoint, subject and fault in a process: its processor is built once."""
    key = (path, recipe.name, name, fault)
    if key not in _SUBJECTS:
        _SUBJECTS[key] = make_subject(name, path, recipe, fault)
    return _SUBJECTS[key]


def make_context(fixture: str, subject: str, fault: str | None = None, *,
                 path: str | None = None, recipe: Any = None) -> Context:
    """For a fixture by name, or for any checkpoint folder with a recipe made for it."""
    if recipe is None:
        from fixtures.registry import get_recipe

        recipe = get_recipe(fixture)
    path = path or fixture_path(fixture)
    # Oracle outputs are shared by every check on the checkpoint: cases repeat across checks
    memo = _MEMOS.setdefault((path, recipe.name), {})
    return Context(fixture, path, recipe, _subject(path, recipe, subject, fault),
                   _oracles(path, recipe), memo)
