"""dummy-data's comparison, on dummy items given as data (no vLLM processor): what it judges
with and without dummy options, against native vLLM and, without one, against the options."""

from __future__ import annotations

from conformance.checks.dummy_data import binding, compare
from conformance.subjects.vllm_dummy import DummyItems

NATIVE = DummyItems(((28, 28),), (4,))
OPTIONS = {"width": 14, "height": 7}
WITH = "with options width=14,height=7"


def test_the_options_bind_below_both_sides_largest_item():
    assert binding("image", [(28, 56), (10000, 10000)]) == {"width": 14, "height": 14}
    assert binding("audio", [(9600000,), (480000,)]) == {"length": 240000}


def test_sizes_are_judged_only_where_options_bind_them():
    # without options each side picks its own largest item: only embeddings are compared
    assert compare("image", "without options", DummyItems(((10000, 10000),), (4,)), NATIVE,
                   None) == []
    assert compare("image", "without options", DummyItems(((10000, 10000),), (1,)), NATIVE,
                   None) == ["dummy image 0 embeddings: backend 1 vs native 4 without options"]
    dropped = DummyItems(((10000, 10000),), (4,))
    assert compare("image", WITH, dropped, DummyItems(((14, 7),), (4,)), OPTIONS) == [
        "dummy image 0: backend 10000x10000 vs native 14x7 with options width=14,height=7"]


def test_items_built_and_placed_are_counted():
    found = compare("image", "without options", DummyItems(((28, 28), (28, 28)), ()), NATIVE,
                    None)
    assert found == ["dummy images built: backend 2 vs native 1 without options",
                     "dummy images placed: backend 0 vs native 1 without options"]


def test_without_native_vllm_the_options_are_the_oracle():
    assert compare("image", "without options", DummyItems(((10000, 10000),), (20,)), None,
                   None) == []
    assert compare("image", WITH, DummyItems(((10000, 10000),), (20,)), None, OPTIONS) == [
        "dummy image 0: backend 10000x10000 vs options 14x7 with options width=14,height=7"]
    assert compare("audio", "with options length=8000", DummyItems(((8000,),), (12,)), None,
                   {"length": 8000}) == []


def test_a_dummy_input_the_backend_cannot_process_is_evidence():
    found = compare("audio", "without options", ValueError("no offsets"), None, None)
    assert found == ["backend cannot build or process its own dummy audio (without options): "
                     "ValueError: no offsets"]
