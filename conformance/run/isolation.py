"""Keep one case's processor options from reaching the next case in the same process.

Many transformers processors' `_get_num_multimodal_tokens` update their `*ProcessorKwargs`
class's `_defaults` in place with the options they are given (transformers 5.17: Aya Vision,
Idefics3, Qwen2-VL, LLaVA, ...), so an option counted once becomes every later call's default,
in every instance of that processor. One vLLM deployment passes the same model-level options to
every call, so it never sees a difference; a harness that alternates options does. Each case
therefore runs with those defaults restored afterwards.
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


@contextlib.contextmanager
def processor_defaults_restored() -> Iterator[None]:
    saved = {cls: copy.deepcopy(vars(cls)["_defaults"]) for cls in processor_kwargs_classes()}
    try:
        yield
    finally:
        for cls, defaults in saved.items():
            cls._defaults = defaults
