"""Version comparison without third-party packages, enough for transformers releases."""

from __future__ import annotations

import re

_PRE = re.compile(r"(a|alpha|b|beta|c|rc|pre|preview|dev)\d*")
_POST = re.compile(r"post\d*")


def version_key(version: str) -> tuple[tuple[int, ...], int]:
    """Release numbers (trailing zeros dropped), then 0 for a pre-release (a/b/rc/dev) or 1
    for a final or post release. Local labels (+cpu) are ignored."""
    match = re.match(r"\s*v?(\d+(?:\.\d+)*)(.*)", version)
    if match is None:
        raise ValueError(f"not a version: {version!r}")
    release = [int(part) for part in match.group(1).split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    suffix = match.group(2).split("+", 1)[0].lower()
    pre = _PRE.search(suffix) is not None and _POST.search(suffix) is None
    return tuple(release), 0 if pre else 1


def at_least(version: str, minimum: str) -> bool:
    return version_key(version) >= version_key(minimum)
