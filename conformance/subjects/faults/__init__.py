"""Faults planted on purpose, to prove that each check can fail (and says why).

Three kinds, by what they change:
- `impl`: one step of our reference implementation (the `impl` subject plants it per call);
- `backend`: vLLM's Transformers backend itself, patched in this process only (its processor
  or its model class; never the installed files);
- `media`: the subject's media for the checkpoint-level checks (items swapped), so that the
  subject computes on other data than the oracle.

A command parses `--fault` once into a `Fault`, which travels with each cell it reaches (routed
to the cell's subject and transformers version: `Fault.routed`). `with planted(fault):` patches
for the duration of the block (impl and backend faults); `fault.media` is the hook the
checkpoint-level checks apply to the subject's items. Reproducer scripts name the fault, so a
planted failure reproduces on its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from conformance.core.subjects import IMPL, VLLM_BACKEND
from conformance.subjects.faults import backend_model, backend_processing, impl_steps
from impl.version import at_least, parse_version


def swap_first_two(items: list) -> list:
    return [items[1], items[0], *items[2:]] if len(items) > 1 else items


FAULTS: dict[str, Callable[[], list[Any]]] = {
    "no-unpad": impl_steps.no_unpad,
    "offset-shift": impl_steps.offset_shift,
    "wrong-embed-token": impl_steps.wrong_embed_token,
    "wrong-slice-dim": impl_steps.wrong_slice_dim,
    "hash-neighbours": impl_steps.hash_neighbours,
    "options-ignored": impl_steps.options_ignored,
    "errors-swallowed": impl_steps.errors_swallowed,
    "backend-offset-shift": backend_processing.offset_shift,
    "backend-request-options-ignored": backend_processing.request_options_ignored,
    "backend-scoped-options-ignored": backend_processing.scoped_options_ignored,
    "backend-disk-options-ignored": backend_processing.disk_options_ignored,
    "backend-cache-key-without-options": backend_processing.cache_key_without_options,
    "backend-budget-one-short": backend_processing.budget_one_short,
    "backend-budget-options-ignored": backend_processing.budget_options_ignored,
    "backend-dummy-options-dropped": backend_processing.dummy_options_dropped,
    "backend-rows-per-token": backend_processing.rows_per_token,
    "backend-fields-one-modality": backend_processing.fields_one_modality,
    "backend-logits-negated": backend_model.logits_negated,
    "backend-text-only-stack": backend_model.text_only_stack,
    "backend-logits-scaled": backend_model.logits_scaled,
    "backend-row-shifted": backend_model.row_shifted,
    "backend-pooled-rolled": backend_model.pooled_rolled,
    "backend-one-item": backend_processing.one_item,
    "backend-bos-doubled": backend_processing.bos_doubled,
    "backend-embed-dropped": backend_processing.embed_dropped,
    "backend-hash-per-request": backend_processing.hash_per_request,
    "backend-field-entry-dropped": backend_processing.field_entry_dropped,
    "backend-cache-stale-fields": backend_processing.cache_stale_fields,
    "backend-errors-swallowed": backend_processing.errors_swallowed,
    "backend-mrope-shifted": backend_model.mrope_shifted,
    "backend-config-default": backend_model.config_default,
}


# media faults: hooks applied to the subject's items by the checkpoint-level checks
MEDIA_FAULTS: dict[str, Callable[[list], list]] = {"swapped-items": swap_first_two}


def kind(name: str) -> str:
    """`impl`, `backend` or `media`."""
    if name in MEDIA_FAULTS:
        return "media"
    if name.startswith("backend-"):
        return "backend"
    if name in FAULTS:
        return "impl"
    raise KeyError(f"unknown fault {name!r} (known: {', '.join([*FAULTS, *MEDIA_FAULTS])})")


# The subject each fault targets, by its registered name: a cell plants a fault only where its
# subject is the target (`run/cell.py`). impl's steps are impl's; vLLM's backend and the media
# the checkpoint-level checks hand it are the backend's.
TARGETS: dict[str, str] = {
    **{name: VLLM_BACKEND if name.startswith("backend-") else IMPL for name in FAULTS},
    **dict.fromkeys(MEDIA_FAULTS, VLLM_BACKEND),
}


def target(name: str) -> str:
    """The registered name of the subject the fault `name` targets."""
    if name not in TARGETS:
        raise KeyError(f"unknown fault {name!r} (known: {', '.join(TARGETS)})")
    return TARGETS[name]


@dataclass(frozen=True)
class Fault:
    """A fault to plant, parsed once from its spec (`name`, or `name>=VERSION`: planted only
    from that transformers version on) where a command reads it; it travels with each cell it
    reaches (`run/plan.py`'s `Cell`), to a worker as `to_json()`'s fields."""

    name: str
    since: str | None = None  # the first transformers version it is planted on

    def __post_init__(self) -> None:
        """A one-line ValueError for an unknown name (naming the known ones) or version."""
        if self.name not in TARGETS:
            raise ValueError(f"unknown fault {self.name!r} (known: {', '.join(TARGETS)})")
        if self.since is not None:
            parse_version(self.since)

    @classmethod
    def parse(cls, spec: str) -> Fault:
        name, _, since = spec.partition(">=")
        return cls(name, since or None)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Fault:
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "since": self.since}

    def __str__(self) -> str:
        """Its spec, as given (a reproducer and impl's subject name it so)."""
        return self.name if self.since is None else f"{self.name}>={self.since}"

    @property
    def target(self) -> str:
        """The registered name of the subject it targets."""
        return TARGETS[self.name]

    @property
    def media(self) -> Callable[[list], list] | None:
        """The hook the checkpoint-level checks apply to the subject's items (None: no media
        fault)."""
        return MEDIA_FAULTS.get(self.name)

    def on(self, version: str) -> Fault | None:
        """This fault where it is planted under transformers `version`, else None."""
        return self if self.since is None or at_least(version, self.since) else None

    def routed(self, subject: str, version: str) -> Fault | None:
        """This fault for a cell of `subject` on transformers `version`: only where it targets
        that subject and is planted on that version, else None."""
        return self.on(version) if self.target == subject else None


PLANTED: list[str] = []  # the faults planted now (outputs computed meanwhile are not kept)


def planted(fault: Fault | None) -> contextlib.AbstractContextManager[None]:
    """`fault` planted for a `with` block; nothing to plant (no fault, or a media fault: the
    checkpoint-level checks' own hook, `Fault.media`) costs no generator: impl's subject
    enters this once per prompt. Whether it is planted at all (its subject, its version) was
    decided once, for its cell (`Fault.routed`)."""
    if fault is None or fault.media is not None:
        return contextlib.nullcontext()
    return _planting(fault.name)


@contextlib.contextmanager
def _planting(name: str) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for patch in FAULTS[name]():
            stack.enter_context(patch)
        PLANTED.append(name)
        try:
            yield
        finally:
            PLANTED.pop()
