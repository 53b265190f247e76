"""How a request's processor options meet the model's before they reach the HF processor.

Two levels of options exist: the model's (the deployment's `mm_processor_kwargs`) and a
request's own. Either may give options flat (`{"size": ...}`) or grouped by the modality they
are for, in transformers' kwargs groups (`{"images_kwargs": {"size": ...}}`); the HF processor
takes both at once, and refuses an option given flat and in a group alike ("passed two times").

Up to vLLM 0.31.0 a request's options simply replace the model's of the same name. From 0.32.0
(`OPTION_SCOPES`) the two levels are merged key by key, groups separately, and a flat option a
group also holds is dropped before the processor sees it. Every step of the backend that hands
options to the processor reads them through here:
- `call_options`: the options of every HF processor call (the main call, each audio alone,
  profiling's dummy call) and of the per-image row count (with no request's options);
- `construction_options`: what the processor a request is made with is built from (those its
  `__call__` takes are then set aside by `impl.hf.load_processor`).
The processor cache keys an item by the request's own options as given (`impl.hashing`): no
merge is involved, in any release.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from impl.release import DEFAULT, OPTION_SCOPES, Profile

# transformers' kwargs groups: the only keys whose values are themselves options
SCOPES = ("text_kwargs", "images_kwargs", "videos_kwargs", "audio_kwargs")


def merge_nested(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `over` on top; where both hold a mapping under one key, the two mappings are
    merged the same way, else `over`'s value replaces `base`'s."""
    merged = dict(base)
    for key, value in over.items():
        below = merged.get(key)
        both = isinstance(below, Mapping) and isinstance(value, Mapping)
        merged[key] = merge_nested(below, value) if both else value
    return merged


def flat_part(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options given outside any kwargs group."""
    return {key: value for key, value in options.items() if key not in SCOPES}


def group_of(options: Mapping[str, Any], scope: str) -> Any:
    """The value under kwargs group `scope`; an empty mapping counts as no group at all."""
    value = options.get(scope)
    return None if isinstance(value, Mapping) and not value else value


def merge_group(model_flat: Mapping[str, Any], model_group: Mapping[str, Any],
                request_flat: Mapping[str, Any], request_group: Mapping[str, Any]
                ) -> dict[str, Any]:
    """One kwargs group of the merge. Flat options join it only under names either level's
    group holds (a group is for the options it names), and the four layers stack from the
    least specific: model flat, model group, request flat, request group."""
    names = model_group.keys() | request_group.keys()
    merged = merge_nested({k: v for k, v in model_flat.items() if k in names}, model_group)
    merged = merge_nested(merged, {k: v for k, v in request_flat.items() if k in names})
    return merge_nested(merged, request_group)


def merge_options(model: Mapping[str, Any], request: Mapping[str, Any], *,
                  profile: Profile = DEFAULT) -> dict[str, Any]:
    """The model's options with the request's over them: name for name (0.31.0), or
    (`OPTION_SCOPES`) flat options merged apart from the groups, and each group a level gives
    as a mapping merged with `merge_group`. A group given as anything else (None aside) is
    kept as given, the request's before the model's; None or empty at both levels, it is gone."""
    if not profile.has(OPTION_SCOPES):
        return {**model, **request}
    model_flat, request_flat = flat_part(model), flat_part(request)
    merged = merge_nested(model_flat, request_flat)
    for scope in SCOPES:
        below, above = group_of(model, scope), group_of(request, scope)
        if below is None and above is None:
            continue
        if above is not None and not isinstance(above, Mapping):
            merged[scope] = above  # nothing to merge into: the request's value stands
            continue
        if not isinstance(below, Mapping) and above is None:
            merged[scope] = below  # likewise the model's, where the request gives no group
            continue
        merged[scope] = merge_group(model_flat, below if isinstance(below, Mapping) else {},
                                    request_flat, above or {})
    return merged


def resolve_scopes(options: Mapping[str, Any], *, profile: Profile = DEFAULT) -> dict[str, Any]:
    """Merged options as the processor takes them: as they are (0.31.0), or (`OPTION_SCOPES`)
    without the flat options whose names a kwargs group (a mapping) holds, the group's value
    having been merged over the flat one already; the processor would refuse both."""
    if not profile.has(OPTION_SCOPES):
        return dict(options)
    grouped = {name for scope in SCOPES if isinstance(group := options.get(scope), Mapping)
               for name in group}
    return {key: value for key, value in options.items() if key in SCOPES or key not in grouped}


def call_options(model: Mapping[str, Any], request: Mapping[str, Any], *,
                 profile: Profile = DEFAULT) -> dict[str, Any]:
    """The options an HF processor call gets for a request's options `request` (the layer the
    backend adds for the call included) under the model's `model`."""
    return resolve_scopes(merge_options(model, request, profile=profile), profile=profile)


def construction_options(model: Mapping[str, Any], request: Mapping[str, Any], *,
                         profile: Profile = DEFAULT) -> dict[str, Any]:
    """The options the processor for a request is built from: its call options merged under
    the model's once more (the processor loader merges what it is given with the model's),
    which puts back a flat model option that resolving dropped. 0.31.0: the model's options
    with the request's over them."""
    called = call_options(model, request, profile=profile)
    return merge_options(model, called, profile=profile)
