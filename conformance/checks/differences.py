"""The one vocabulary of differences: the first differing token, placeholder, field or value.

Every comparison names its two sides (`names`: the oracle first, then the subject), so evidence
reads the same whoever is compared: "prompt ids differ at position 5: native [..] vs backend
[..]", "image item 1: ranges differ: native offset=7 length=4 embeds=all vs impl offset=8 ...".
Known findings match these phrases, so change them only together with expectations/.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from impl.types import Placeholder, ProcessedPrompt

Names = tuple[str, str]
EXPECTED: Names = ("expected", "got")


def error_text(error: BaseException) -> str:
    """An exception as evidence: its type and message, and the error it was raised from where
    that one says what failed (vLLM wraps a failing HF processor call in 'Failed to apply
    <Processor> on data=...': the cause is what tells one failure from another)."""
    import traceback

    text = "".join(traceback.format_exception_only(type(error), error)).strip()
    cause = error.__cause__
    if cause is not None and str(cause) and str(cause) not in text:
        text += f" (caused by {type(cause).__name__}: {' '.join(str(cause).split())[:300]})"
    return text


def describe(p: Placeholder) -> str:
    embeds = "all" if len(p.embed_positions) == p.length else (
        f"{len(p.embed_positions)} of {p.length}")
    return f"offset={p.offset} length={p.length} embeds={embeds}"


def ids_difference(expected: tuple[int, ...], actual: tuple[int, ...],
                   names: Names = EXPECTED) -> str | None:
    if expected == actual:
        return None
    pairs = enumerate(zip(expected, actual, strict=False))
    index = next((i for i, (x, y) in pairs if x != y), min(len(expected), len(actual)))
    return (f"prompt ids differ at position {index}: {names[0]} "
            f"{list(expected[index:index + 6])} vs {names[1]} {list(actual[index:index + 6])} "
            f"(lengths {len(expected)} vs {len(actual)})")


def moved(x: Placeholder, y: Placeholder, b: str) -> str:
    """How range `y` lies against `x`: where each of its ends moved, in tokens (a known shape
    of difference, such as a range covering only the soft tokens, reads the same on every
    item, and another one does not)."""
    start = y.offset - x.offset
    end = (y.offset + y.length) - (x.offset + x.length)
    return f"{b} starts {start:+d}, ends {end:+d}"


def item_pairs(expected: ProcessedPrompt, actual: ProcessedPrompt, names: Names,
               found: list[str]) -> Iterator[tuple[str, Placeholder, Placeholder]]:
    """Each item's two placeholders ("<modality> item <i>", expected's, actual's), modality by
    modality; a modality whose counts of items differ is a difference in `found` instead."""
    for modality in sorted(set(expected.placeholders) | set(actual.placeholders)):
        mine = expected.placeholders.get(modality, ())
        theirs = actual.placeholders.get(modality, ())
        if len(mine) != len(theirs):
            found.append(f"{modality}: {names[0]} has {len(mine)} placeholders, {names[1]} "
                         f"{len(theirs)}")
            continue
        for index, (x, y) in enumerate(zip(mine, theirs, strict=True)):
            yield f"{modality} item {index}", x, y


def placeholders_differences(expected: ProcessedPrompt, actual: ProcessedPrompt,
                             names: Names = EXPECTED) -> list[str]:
    """Per modality its count of items, then per item its range and embedding positions: one
    difference per item, so that a known difference of one item hides no other item's."""
    a, b = names
    found: list[str] = []
    for where, x, y in item_pairs(expected, actual, names, found):
        if (x.offset, x.length) != (y.offset, y.length):
            found.append(f"{where}: ranges differ: {a} {describe(x)} vs {b} {describe(y)} "
                         f"({moved(x, y, b)})")
        elif x.embed_positions != y.embed_positions:
            only_a = sorted(set(x.embed_positions) - set(y.embed_positions))[:5]
            only_b = sorted(set(y.embed_positions) - set(x.embed_positions))[:5]
            found.append(f"{where}: embedding positions differ: {a} {describe(x)}, {b} "
                         f"{describe(y)}; only {a} {only_a}, only {b} {only_b}")
        found += held_difference(where, expected, actual, x, y, names)
    return found


def held_difference(where: str, expected: ProcessedPrompt, actual: ProcessedPrompt,
                    x: Placeholder, y: Placeholder, names: Names) -> list[str]:
    """The ids each side's embedding positions hold, as sets: apart from where a range lies,
    what the encoder's rows replace (a known range that covers other text than the other
    side's still holds the same tokens, a shifted one does not)."""
    held_x = [expected.prompt_ids[q] for q in x.embed_positions]
    held_y = [actual.prompt_ids[q] for q in y.embed_positions]
    # as many positions: the same ids in the same order; else the same ids at all
    if held_x == held_y or (len(held_x) != len(held_y) and set(held_x) == set(held_y)):
        return []
    return [f"{where}: its embedding positions hold other ids: {names[0]} "
            f"{sorted(set(held_x))} vs {names[1]} {sorted(set(held_y))}"]


def placeholders_difference(expected: ProcessedPrompt, actual: ProcessedPrompt,
                            names: Names = EXPECTED) -> str | None:
    """The first of `placeholders_differences`."""
    found = placeholders_differences(expected, actual, names)
    return found[0] if found else None


def prompt_difference(expected: ProcessedPrompt, actual: ProcessedPrompt,
                      names: Names = EXPECTED) -> str | None:
    """The first of `prompt_differences`."""
    found = prompt_differences(expected, actual, names)
    return found[0] if found else None


def prompt_differences(expected: ProcessedPrompt, actual: ProcessedPrompt,
                       names: Names = EXPECTED) -> list[str]:
    """The ids, then the placeholders item by item, each a difference of its own (a known ids
    difference never hides a wrong range, a known range of one item no other item's). In equal
    prompts ranges compare position by position; in prompts whose ids differ, item by item as
    what each range holds (`items_differences`)."""
    ids = ids_difference(expected.prompt_ids, actual.prompt_ids, names)
    ranges = (items_differences(expected, actual, names) if ids
              else placeholders_differences(expected, actual, names))
    return [ids, *ranges] if ids else ranges


def items_differences(expected: ProcessedPrompt, actual: ProcessedPrompt,
                      names: Names = EXPECTED) -> list[str]:
    """Per item, in prompts whose ids differ: the same count of items, each range of the same
    length with the same embedding positions within it, holding the same ids there (the
    tokens the encoder's rows replace; a range's edges may hold differently merged text)."""
    a, b = names
    found: list[str] = []
    for where, x, y in item_pairs(expected, actual, names, found):
        inner_x = [q - x.offset for q in x.embed_positions]
        inner_y = [q - y.offset for q in y.embed_positions]
        if (x.length, inner_x) != (y.length, inner_y):
            found.append(f"{where}: ranges differ within the item: {a} {describe(x)} vs {b} "
                         f"{describe(y)} (beside the embeddings {a}'s range holds "
                         f"{beside(x, expected.prompt_ids)}, {b}'s "
                         f"{beside(y, actual.prompt_ids)})")
        found += held_difference(where, expected, actual, x, y, names)
    return found


def beside(p: Placeholder, ids: tuple[int, ...]) -> str:
    """The ids a range holds at its positions that are not embedding positions, as a set:
    what one range covers and another does not (markers around an item's soft tokens) reads
    the same whatever the item's size."""
    embeds = set(p.embed_positions)
    held = sorted({ids[q] for q in range(p.offset, p.offset + p.length) if q not in embeds})
    return f"ids {{{', '.join(map(str, held))}}}" if held else "none"


def value_difference(expected: Any, actual: Any, where: str) -> str | None:
    import torch

    if isinstance(expected, torch.Tensor) or isinstance(actual, torch.Tensor):
        if not (isinstance(expected, torch.Tensor) and isinstance(actual, torch.Tensor)):
            return f"{where}: {type(expected).__name__} vs {type(actual).__name__}"
        if expected.shape != actual.shape:
            # which dimensions differ, named before the sizes: a known padding of one
            # dimension (tiles) reads the same whatever the sizes, a cut in another does not
            dims = (f"rank {expected.dim()} vs {actual.dim()}" if expected.dim() != actual.dim()
                    else "dimension " + ", ".join(
                        str(i) for i, (x, y) in enumerate(zip(expected.shape, actual.shape,
                                                              strict=True)) if x != y))
            return (f"{where}: shape differs ({dims}): {list(expected.shape)} vs "
                    f"{list(actual.shape)}")
        if expected.dtype != actual.dtype:
            return f"{where}: dtype {expected.dtype} vs {actual.dtype}"
        if not torch.equal(expected, actual):
            diff = (expected.double() - actual.double()).abs()
            first = [int(i) for i in torch.nonzero(diff)[0].tolist()]
            return f"{where}: values differ (max abs {diff.max().item():.3g}, first at {first})"
        return None
    if isinstance(expected, (list, tuple)) and isinstance(actual, (list, tuple)):
        if len(expected) != len(actual):
            return f"{where}: {len(expected)} entries vs {len(actual)}"
        for i, (x, y) in enumerate(zip(expected, actual, strict=True)):
            if difference := value_difference(x, y, f"{where}[{i}]"):
                return difference
        return None
    if isinstance(expected, dict) and isinstance(actual, dict):
        if set(expected) != set(actual):
            return f"{where}: fields {sorted(expected)} vs {sorted(actual)}"
        for key in sorted(expected):
            if difference := value_difference(expected[key], actual[key], f"{where}.{key}"):
                return difference
        return None
    return None if expected == actual else f"{where}: {expected!r} vs {actual!r}"


def output_difference(expected: ProcessedPrompt, actual: ProcessedPrompt) -> str | None:
    """Everything a request's processing yields: ids, placeholders, per-item fields, hashes."""
    if difference := prompt_difference(expected, actual):
        return difference
    for modality in sorted(set(expected.item_fields) | set(actual.item_fields)):
        mine = expected.item_fields.get(modality, [])
        theirs = actual.item_fields.get(modality, [])
        if difference := value_difference(mine, theirs, f"{modality} fields"):
            return difference
    if expected.item_hashes != actual.item_hashes:
        return f"item hashes differ: {expected.item_hashes} vs {actual.item_hashes}"
    return None


def served_form(hf_value: Any, served: Any) -> Any:
    """The HF processor's value for one item in the form vLLM serves it, changed only as
    documented: a batched field drops its leading dimension of 1 (one entry per item), Python
    numbers become a tensor, and floating-point data takes the served dtype (vLLM casts it to
    the model's dtype)."""
    import torch

    if isinstance(hf_value, list) and len(hf_value) == 1 and not isinstance(served, list):
        hf_value = hf_value[0]
    if isinstance(hf_value, (int, float, list)) and isinstance(served, torch.Tensor):
        # a plain value the processor returns as Python numbers (Qwen2.5-VL's
        # second_per_grid_ts) is served as a tensor of them
        hf_value = torch.as_tensor(hf_value)
    if not (isinstance(hf_value, torch.Tensor) and isinstance(served, torch.Tensor)):
        return hf_value
    if hf_value.shape != served.shape and hf_value.shape[:1] == (1,) \
            and hf_value.shape[1:] == served.shape:
        hf_value = hf_value[0]
    if hf_value.is_floating_point() and served.is_floating_point():
        hf_value = hf_value.to(served.dtype)
    return hf_value
