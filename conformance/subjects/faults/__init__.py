"""Faults planted on purpose, to prove that each check can fail (and says why).

Three kinds, by what they change:
- `impl`: one step of our reference implementation (the `impl` subject plants it per call);
- `backend`: vLLM's Transformers backend itself, patched in this process only (its processor
  or its model class; never the installed files);
- `media`: the subject's media for the checkpoint-level checks (items swapped), so that the
  subject computes on other data than the oracle.

`with planted(name):` patches for the duration of the block (impl and backend faults);
`media_fault(name)` gives the hook the checkpoint-level checks apply to the subject's items.
Reproducer scripts name the fault, so a planted failure reproduces on its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from conformance.core.subjects import IMPL, VLLM_BACKEND
from conformance.subjects.faults import backend_model, backend_processing, impl_steps


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


def media_fault(spec: str | None) -> Callable[[list], list] | None:
    """The media hook of `spec` (None when it is no media fault or not active)."""
    name = active(spec)
    return MEDIA_FAULTS.get(name) if name else None


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


def routed(spec: str | None, subject: str) -> str | None:
    """`spec` where the fault it names is active and targets the subject named `subject`."""
    name = active(spec)
    return spec if name is not None and target(name) == subject else None


def active(spec: str | None) -> str | None:
    """`name` or `name>=VERSION` (planted only from that transformers version on): the fault
    to plant under the installed transformers, if any."""
    if not spec:
        return None
    name, _, since = spec.partition(">=")
    if since:
        import transformers

        from impl.version import at_least

        if not at_least(transformers.__version__, since):
            return None
    return name


PLANTED: list[str] = []  # the faults planted now (outputs computed meanwhile are not kept)


def planted(spec: str | None) -> contextlib.AbstractContextManager[None]:
    """The fault `spec` names planted for a `with` block; nothing to plant (no fault, a media
    fault, or one not active under this transformers) costs no generator: impl's subject
    enters this once per prompt."""
    name = active(spec)
    if name is None or name in MEDIA_FAULTS:
        return contextlib.nullcontext()
    if name not in FAULTS:
        raise KeyError(f"unknown fault {name!r} (known: {', '.join(FAULTS)})")
    return _planting(name)


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
