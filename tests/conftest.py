"""Shared test configuration: offline, quiet, and fixtures built once per session."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import importlib.util  # noqa: E402

import pytest  # noqa: E402

HAS_VLLM = importlib.util.find_spec("vllm") is not None


def pytest_collection_modifyitems(config, items):
    # Tests that load a model in vLLM run last: loading the backend decorates transformers'
    # model classes for the whole process, after which no fixture can be built or HF model
    # instantiated outside a vLLM config (tests/test_fixtures.py does both).
    items.sort(key=lambda item: "model" in item.keywords)
    if HAS_VLLM:
        return
    skip = pytest.mark.skip(reason="vLLM is not installed in this environment")
    for item in items:
        if "vllm" in item.keywords or "model" in item.keywords:
            item.add_marker(skip)
