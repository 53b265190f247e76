"""Expanding an unexpanded prompt: each item's target token sequence is replaced by its
replacement, the i-th match of a modality's target going to item i.

Matching happens on token ids first. Only if some item finds no match (its target tokenizes
differently inside the surrounding text) is the whole prompt redone on its decoded text and
re-encoded, after which placeholders are found by scanning for the replacement tokens.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from impl.types import Placeholder, placeholder_from_mask

Span = tuple[int, int]


@dataclass(frozen=True)
class Replacement:
    modality: str
    item_index: int
    target: tuple[int, ...]
    tokens: tuple[int, ...]
    embed_token_id: int

    def is_embed(self) -> list[bool]:
        return [token == self.embed_token_id for token in self.tokens]

    def placeholder_at(self, offset: int) -> Placeholder:
        return placeholder_from_mask(offset, self.is_embed(), len(self.tokens))


Updates = Mapping[str, Sequence[Replacement]]
FindFirst = Callable[[tuple[int, ...], int], Span | None]


def find_token_match(prompt: Sequence[int], target: Sequence[int], start: int) -> Span | None:
    """First occurrence of `target` at or after `start`; an empty target never matches."""
    size = len(target)
    if size == 0:
        return None
    if not isinstance(prompt, (list, tuple)):
        prompt = list(prompt)
    target = list(target)
    # candidates are the positions of the target's first token (list.index runs in C)
    index, stop = start, len(prompt) - size + 1
    while index < stop:
        try:
            index = prompt.index(target[0], index, stop)
        except ValueError:
            return None
        if size == 1 or list(prompt[index : index + size]) == target:
            return index, index + size
        index += 1
    return None


def find_text_match(text: str, target: str, start: int) -> Span | None:
    if not target:
        return None
    index = text.find(target, start)
    return None if index == -1 else (index, index + len(target))


def plan_replacements(updates: Updates, find_first: FindFirst) -> list[tuple[Span, Replacement]]:
    """Pick the non-overlapping matches, left to right.

    Items sharing a target wait in one queue, in modality-then-item order. Each round every
    queue's head looks for its first match after the last one taken, and only the earliest
    match (ties: the earlier queued item) is taken.
    """
    queues: dict[tuple[int, ...], deque[tuple[int, Replacement]]] = {}
    priority = 0
    for replacements in updates.values():
        for replacement in replacements:
            queues.setdefault(replacement.target, deque()).append((priority, replacement))
            priority += 1

    planned: list[tuple[Span, Replacement]] = []
    position = 0
    pending = list(queues.values())
    while pending:
        heads = []
        for queue in pending:
            head_priority, head = queue[0]
            span = find_first(head.target, position)
            if span is not None:
                heads.append((span, head_priority, queue))
        if not heads:
            break
        span, _, queue = min(heads, key=lambda entry: (entry[0], entry[1]))
        _, replacement = queue.popleft()
        planned.append((span, replacement))
        position = span[1]
        pending = [queue for queue in pending if queue]
    return planned


def all_planned(updates: Updates, planned: Sequence[tuple[Span, Replacement]]) -> bool:
    done = {(r.modality, r.item_index) for _, r in planned}
    return all((r.modality, r.item_index) in done for rs in updates.values() for r in rs)


def apply_in_tokens(
    prompt: Sequence[int], updates: Updates
) -> tuple[list[int], dict[str, list[Placeholder]], bool]:
    """The expanded prompt, its placeholders, and whether every item found its target."""
    planned = plan_replacements(
        updates, lambda target, start: find_token_match(prompt, target, start)
    )
    expanded: list[int] = []
    placeholders: dict[str, list[Placeholder]] = {}
    previous_end = 0
    for (start, end), replacement in planned:
        expanded.extend(prompt[previous_end:start])
        if replacement.tokens:
            placeholders.setdefault(replacement.modality, []).append(
                replacement.placeholder_at(len(expanded))
            )
            expanded.extend(replacement.tokens)
        previous_end = end
    expanded.extend(prompt[previous_end:])
    return expanded, placeholders, all_planned(updates, planned)


def apply_in_text(prompt: Sequence[int], updates: Updates, tokenizer: Any) -> list[int]:
    text = tokenizer.decode(list(prompt))
    planned = plan_replacements(
        updates,
        lambda target, start: find_text_match(text, tokenizer.decode(list(target)), start),
    )
    if not all_planned(updates, planned):
        missing = [
            f"{r.modality}[{r.item_index}]"
            for rs in updates.values()
            for r in rs
            if all(r is not p for _, p in planned)
        ]
        raise AssertionError(
            f"the prompt holds no placeholder left for item(s) {', '.join(missing)}"
        )
    pieces: list[str] = []
    previous_end = 0
    for (start, end), replacement in planned:
        pieces.append(text[previous_end:start])
        pieces.append(tokenizer.decode(list(replacement.tokens)))
        previous_end = end
    pieces.append(text[previous_end:])
    return list(tokenizer.encode("".join(pieces), add_special_tokens=False))


def scan_placeholders(prompt: Sequence[int], updates: Updates) -> dict[str, list[Placeholder]]:
    """Find each item's replacement tokens in an already expanded prompt, items in order."""
    next_item = {modality: 0 for modality in updates}
    found: dict[str, list[Placeholder]] = {}

    def pending() -> list[Replacement]:
        return [
            updates[modality][index]
            for modality, index in next_item.items()
            if index < len(updates[modality])
        ]

    candidates = pending()
    position = 0
    while candidates and position < len(prompt):
        for replacement in candidates:
            tokens = list(replacement.tokens)
            end = position + len(tokens)
            if tokens and end <= len(prompt) and list(prompt[position:end]) == tokens:
                found.setdefault(replacement.modality, []).append(
                    replacement.placeholder_at(position)
                )
                next_item[replacement.modality] += 1
                position = end
                candidates = pending()
                break
        else:
            position += 1
    return found


def expand_prompt(
    prompt: Sequence[int], updates: Updates, tokenizer: Any
) -> tuple[list[int], dict[str, list[Placeholder]]]:
    expanded, placeholders, complete = apply_in_tokens(prompt, updates)
    if complete:
        return expanded, placeholders
    expanded = apply_in_text(prompt, updates, tokenizer)
    return expanded, scan_placeholders(expanded, updates)
