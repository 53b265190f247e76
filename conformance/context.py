"""Build a check context: a fixture's subject and its oracles on the installed transformers."""

from __future__ import annotations

import functools

from conformance.checks.base import Context
from conformance.subjects import make_subject


@functools.lru_cache(maxsize=32)
def fixture_path(name: str) -> str:
    from fixtures.build import build_fixture

    return str(build_fixture(name))


@functools.lru_cache(maxsize=16)
def oracles_for(fixture: str) -> dict:
    from fixtures.registry import get_recipe

    recipe = get_recipe(fixture)
    path = fixture_path(fixture)
    names = ("vllm-native", "hf") if recipe.native_in_vllm else ("hf",)
    return {name: make_subject(name, path, recipe) for name in names}


def make_context(fixture: str, subject: str, fault: str | None = None) -> Context:
    from fixtures.registry import get_recipe

    recipe = get_recipe(fixture)
    path = fixture_path(fixture)
    return Context(fixture, path, recipe, make_subject(subject, path, recipe, fault),
                   oracles_for(fixture))
