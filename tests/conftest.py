"""Shared test configuration: offline, quiet, and fixtures built once per session."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import importlib.util  # noqa: E402

import pytest  # noqa: E402

HAS_VLLM = importlib.util.find_spec("vllm") is not None


@pytest.fixture(autouse=True)
def _settings_restored():
    """A test that runs a command in-process (`check`) or sets a seed makes its settings the
    process's (`conformance.core.settings.use`): the next test starts from the same ones."""
    from conformance.core import settings

    before = list(settings._current)
    yield
    settings._current[:] = before


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: the mark added here counts
def pytest_collection_modifyitems(config, items):
    # A per-fixture test that loads models runs by default on the representative fixtures
    # only (fixtures.registry.REPRESENTATIVE); on the others it is `slow`.
    from fixtures.registry import REPRESENTATIVE

    for item in items:
        params = getattr(item, "callspec", None)
        fixture = params.params.get("fixture") if params else None
        if "every_fixture" in item.keywords and fixture not in REPRESENTATIVE:
            item.add_marker(pytest.mark.slow)
    order(items)


def order(items) -> None:
    # Tests that load a model in vLLM run last: loading the backend decorates transformers'
    # model classes for the whole process, after which no HF model can be instantiated
    # outside a vLLM config (tests/test_fixtures.py loads every fixture in transformers) and a
    # fixture is built in a process of its own (fixtures/build.py), which costs a start.
    # Within each group, the commands run end to end (the longest tests, in processes of their
    # own) come first, so that under xdist no test process is left alone with one at the end.
    items.sort(key=lambda item: ("model" in item.keywords, "e2e" not in item.keywords))
    if HAS_VLLM:
        return
    skip = pytest.mark.skip(reason="vLLM is not installed in this environment")
    for item in items:
        if "vllm" in item.keywords or "model" in item.keywords:
            item.add_marker(skip)


# Leaving a pass that loaded engines is slow: at interpreter exit each vLLM engine's
# finalizer tears down the distributed state and runs a full `gc.collect()` over the
# process's heap, one engine after another. Nothing is written after the summary, so once
# pytest is done (its exit status kept from `pytest_sessionfinish`) the process leaves
# without those finalizers, as the matrix's workers do (`conformance/run/worker.py::leave`).
_exit_status: list[int] = []


def pytest_sessionfinish(session, exitstatus):
    _exit_status[:] = [int(exitstatus)]


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    import atexit
    import sys

    def leave() -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_exit_status[0])

    # registered last, so run first among the atexit functions: after pytest has returned
    if _exit_status and "vllm" in sys.modules and not os.environ.get("CONFORMANCE_SLOW_EXIT"):
        atexit.register(leave)
