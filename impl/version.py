"""Transformers versions, compared as the backend compares them (packaging's `Version`).

The one version parser of the project: `fixtures` and `conformance` import it from here, so a
dev or rc build (`5.15.0.dev0`, `5.15.0rc1`) is on the same side of every boundary for the
harness as for vLLM's backend (a pre-release of 5.15.0 is below 5.15.0: the Legacy path).
"""

from __future__ import annotations

from functools import lru_cache

from packaging.version import InvalidVersion, Version

# transformers from this release on report text_replacement_offsets (the Offsets path)
OFFSETS_SINCE = "5.15.0"


@lru_cache(maxsize=256)  # Version is immutable; impl asks for the installed one per prompt
def parse_version(version: str) -> Version:
    try:
        return Version(version)
    except InvalidVersion as error:
        raise ValueError(f"not a version: {version!r}") from error


def is_release(text: str) -> bool:
    """A final release as written: MAJOR.MINOR.PATCH and nothing more (no pre-release, dev,
    post or local part, no epoch): `5.25.0`, `0.34.0`; not `0.34.0.dev3`, `5.15.0rc1`."""
    try:
        parsed = parse_version(text)
    except ValueError:
        return False
    return parsed.base_version == text and len(parsed.release) == 3 and not parsed.epoch


def at_least(version: str, minimum: str) -> bool:
    return parse_version(version) >= parse_version(minimum)


def in_range(version: str, minimum: str | None = None, maximum: str | None = None) -> bool:
    """`minimum` inclusive, `maximum` exclusive; None: unbounded."""
    v = parse_version(version)
    if minimum is not None and v < parse_version(minimum):
        return False
    return maximum is None or v < parse_version(maximum)


def bounds(spec: str) -> tuple[str | None, str | None]:
    """A specifier of `>=` and `<` clauses (`">=5.15,<5.17"`, `""`: any) as (minimum, maximum).

    Compared with `Version` directly rather than through packaging's SpecifierSet, whose `<V`
    excludes V's pre-releases: the backend's own `Version(v) < Version("5.15.0")` does not."""
    minimum = maximum = None
    for clause in (c.strip() for c in spec.split(",") if c.strip()):
        if clause.startswith(">="):
            minimum = str(parse_version(clause[2:].strip()))
        elif clause.startswith("<") and not clause.startswith("<="):
            maximum = str(parse_version(clause[1:].strip()))
        else:
            raise ValueError(f"version specifier {spec!r}: only '>=V' and '<V' clauses")
    return minimum, maximum


def matches(version: str, spec: str) -> bool:
    """Whether `version` satisfies `spec` (see `bounds`)."""
    return in_range(version, *bounds(spec))


@lru_cache(maxsize=64)  # asked per prompt: two Version comparisons cost ~20 us each time
def placeholder_strategy(version: str) -> str:
    """`legacy` (search the expanded prompt) or `offsets` (text_replacement_offsets)."""
    return "offsets" if at_least(version, OFFSETS_SINCE) else "legacy"
