"""The Python heap of a long-lived process that loads many models: what the cycle collector
scans.

A worker imports torch, transformers, vLLM and hypothesis once (about 0.7 million objects
that live as long as it does) and then builds engines. vLLM collects garbage in full several
times per engine (its start freezes the heap after three collections, its model runner and its
shutdown collect again), the harness once before each engine and once after dropping one, and
Python itself whenever enough objects survive: each full collection scans every tracked object
that is not frozen, 0.1-0.6 s on this machine. Measured on one version column (42 fixtures, one
worker, 2026-12-04): 45-49 s of 282 s in the cycle collector, mostly scanning the same live
objects again (docs/performance.md, "The cycle collector").

`settle()` collects once and freezes what survives (`gc.freeze`): later collections scan only
what was allocated since. Frozen objects are never collected, so it is called only where the
heap holds no garbage worth keeping apart (after a collection, at points where no engine is half
built) and where what survives stays alive anyway: after the imports, when a worker moves to
its next fixture, after an engine is dropped. vLLM undoes a freeze when an engine shuts down
(`gc.unfreeze()`, so that the engine's memory can be freed); the next settle freezes again.
Nothing of what a check computes depends on when cyclic garbage is freed: the one place where
it did (an engine's finalizer tearing down the process group) is handled explicitly
(`checks/model/loading.py::ModelCache.drop`).
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator

# "0": never freeze (the heap as before; `benchmarks/run.py --only heap` compares the two)
ENABLED = os.environ.get("CONFORMANCE_HEAP_FREEZE", "1") != "0"


def freeze() -> None:
    """Freeze what the heap holds now (right after a collection: there is no garbage in it)."""
    if ENABLED:
        gc.freeze()


def settle() -> None:
    """Collect the garbage now, then freeze what survives (see the module's docstring)."""
    if ENABLED:
        gc.collect()
        gc.freeze()


@contextlib.contextmanager
def settled_after() -> Iterator[None]:
    """Run a block that allocates mostly long-lived objects (imports) without the collector,
    then settle: the collections it would run find almost nothing to free."""
    enabled = gc.isenabled()
    if ENABLED:
        gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        settle()
