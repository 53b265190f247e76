"""Keep one case's processor options from reaching the next case in the same process.

Many transformers processors' `_get_num_multimodal_tokens` update their `*ProcessorKwargs`
class's `_defaults` in place with the options they are given (transformers 5.17: Aya Vision,
Idefics3, Qwen2-VL, LLaVA, ...), so an option counted once becomes every later call's default,
in every instance of that processor. One vLLM deployment passes the same model-level options to
every call, so it never sees a difference; a harness that alternates options does. Each case
therefore runs with those defaults restored afterwards.

Cheap enough to wrap every case: the classes are found once per set of loaded modules (a scan of
every module is milliseconds, far more than a case's own bookkeeping), their defaults copied
once, and after a case only a class whose defaults changed is restored.
"""

from __future__ import annotations

import contextlib
import copy
import sys
from collections.abc import Iterator


def processor_kwargs_classes() -> list[type]:
    """The loaded processor-options classes that carry class-level `_defaults`."""
    found = []
    for name, module in list(sys.modules.items()):
        if not name.startswith("transformers.") or module is None:
            continue
        for value in list(vars(module).values()):
            if isinstance(value, type) and isinstance(vars(value).get("_defaults"), dict):
                found.append(value)
    return found


class _Snapshot:
    """Each known class's defaults as they were before any case changed them."""

    def __init__(self) -> None:
        self.saved: dict[type, dict] = {}
        self.modules = -1  # len(sys.modules) at the last scan

    def refresh(self) -> None:
        if len(sys.modules) == self.modules:
            return
        for cls in processor_kwargs_classes():
            if cls not in self.saved:  # first seen: its defaults as they are now
                self.saved[cls] = copy.deepcopy(vars(cls)["_defaults"])
        self.modules = len(sys.modules)

    def restore(self) -> None:
        for cls, defaults in self.saved.items():
            current = vars(cls).get("_defaults")
            try:
                unchanged = current == defaults
            except Exception:  # values that do not compare (arrays): restore to be sure
                unchanged = False
            if not unchanged:
                cls._defaults = copy.deepcopy(defaults)


_SNAPSHOT = _Snapshot()


@contextlib.contextmanager
def processor_defaults_restored() -> Iterator[None]:
    _SNAPSHOT.refresh()
    try:
        yield
    finally:
        _SNAPSHOT.restore()


@contextlib.contextmanager
def processor_defaults_fresh() -> Iterator[None]:
    """`processor_defaults_restored`, restored on entry as well: the block starts from the
    defaults every case starts from, whatever options ran earlier in the same case (a request
    giving options per request must not find them already made the defaults by the same
    options given model-level)."""
    _SNAPSHOT.refresh()
    _SNAPSHOT.restore()
    try:
        yield
    finally:
        _SNAPSHOT.restore()
