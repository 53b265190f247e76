"""What every subject offers (`Subject`), and the optional features one declares
(`capabilities`): checks ask a subject's declared capabilities, never probe its attributes.

A subject class is built as `cls(path, recipe)`, or `cls(path, recipe, fault=...)` where it
declares `PLANTS_FAULTS`; `conformance.subjects.REGISTRY` names each class once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from conformance.inputs.cases import Case
from impl.types import ProcessedPrompt

# `hf_processor()`: the HF processor it runs on (the errors check patches it)
HF_PROCESSOR = "hf-processor"
# `new_cache(options)` and `process(case, cache=..., as_tokens=...)`: a processor cache
CACHE = "cache"
# `attributes_image_rows()` and `image_row_layout(case, hf_inputs)`: it may derive each image's
# rows itself (the backend's Offsets path)
IMAGE_ROWS = "image-rows"
# it takes video items (where the vLLM under test serves the fixture's videos)
VIDEO = "video"
# built with `fault=`, held as `fault`, and planted around each of its own calls: a fault that
# targets it is handed to it rather than planted around the whole cell
PLANTS_FAULTS = "plants-faults"
CAPABILITIES = frozenset({HF_PROCESSOR, CACHE, IMAGE_ROWS, VIDEO, PLANTS_FAULTS})


@runtime_checkable
class Subject(Protocol):
    """A processor answering with impl's `ProcessedPrompt`: a subject under test or an oracle."""

    name: str  # its registered name (`impl+FAULT` while impl plants a fault)
    capabilities: frozenset[str]  # which of CAPABILITIES it offers

    @property
    def processor(self) -> Any:
        """Its processor for the checkpoint's default options (a cell's setup builds it)."""
        ...

    def process(self, case: Case, *, request_kwargs: Mapping[str, Any] | None = None,
                **options: Any) -> ProcessedPrompt:
        """`case` processed; `request_kwargs`: options of this request alone, over the case's
        model-level ones; `options`: what a capability adds (`cache=`, `as_tokens=`)."""
        ...
