"""Calling the HF processor and its tokenizer the way the backend does."""

from __future__ import annotations

import functools
import importlib
import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any

import torch


def accepted_kwargs(fn: Callable[..., Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Drop the keyword arguments `fn` cannot take; all of them pass if it takes `**kwargs`."""
    # a callable object's signature is its class's: read once per class, not once per call
    usable = _keyword_names(fn if inspect.isroutine(fn) else type(fn))
    if usable is None:
        return dict(kwargs)
    return {name: value for name, value in kwargs.items() if name in usable}


@functools.lru_cache(maxsize=512)
def _keyword_names(target: Any) -> frozenset[str] | None:
    """The keyword arguments `target` (a routine, or a class whose instances are called) takes;
    None when it takes any (`**kwargs`) or has no readable signature."""
    try:
        function = target.__call__ if isinstance(target, type) else target
        params = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    return frozenset(
        name
        for name, p in params.items()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    )


MODALITY_KWARGS = ("text_kwargs", "images_kwargs", "videos_kwargs", "audio_kwargs")


def processor_kwargs_type(processor: Any) -> Any:
    """The TypedDict of options the processor's `__call__` takes: its `**kwargs` annotation
    (`Unpack[XProcessorKwargs]`), else the module's `*ProcessorKwargs` class."""
    annotation = inspect.signature(type(processor).__call__).parameters.get("kwargs")
    if annotation is not None and (args := typing.get_args(annotation.annotation)):
        return args[0]
    module = importlib.import_module(type(processor).__module__)
    return next((obj for name, obj in vars(module).items()
                 if name.endswith("ProcessorKwargs")), None)


def call_time_options(processor: Any) -> set[str]:
    """Options the processor takes per call, in any modality's group."""
    kwargs_type = processor_kwargs_type(processor)
    if kwargs_type is None:
        return set()
    try:
        groups = typing.get_type_hints(kwargs_type)
    except Exception:  # unresolvable forward references: read the raw annotations
        groups = getattr(kwargs_type, "__annotations__", {})
    names: set[str] = set()
    for group in MODALITY_KWARGS:
        for base in getattr(groups.get(group), "__mro__", ()):
            names.update(getattr(base, "__annotations__", {}))
    return names


def load_processor(path: str, options: Mapping[str, Any] | None = None) -> Any:
    """The checkpoint's processor under model-level `options`: those its `__call__` does not
    take per call are construction arguments (the rest, kwargs groups included, reach it with
    every call)."""
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(path)
    dynamic = call_time_options(processor) | set(MODALITY_KWARGS) if options else set()
    construct = {k: v for k, v in (options or {}).items() if k not in dynamic}
    return AutoProcessor.from_pretrained(path, **construct) if construct else processor


# leaves that hold no tensor; tested by exact type before any ABC isinstance check (not
# free), since processors return long nested lists of them (text_replacement_offsets)
_PLAIN = (int, float, str, bool, type(None))


def _plain(value: Any) -> bool:
    """A leaf, or a tuple of leaves (an offset entry's spans): nothing to map inside."""
    kind = type(value)
    return kind in _PLAIN or (kind is tuple and all(type(item) in _PLAIN for item in value))


def map_tensors(value: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """`value` with `fn` applied to every tensor in it (mappings come back as dicts)."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if type(value) is list:
        return [map_tensors(item, fn) for item in value]
    if _plain(value):
        return value
    if isinstance(value, Mapping):
        # leaves stay without a call each: an offset entry is made of them
        return {key: item if _plain(item) else map_tensors(item, fn)
                for key, item in value.items()}
    if isinstance(value, list):
        return [map_tensors(item, fn) for item in value]
    if isinstance(value, tuple):
        return tuple(map_tensors(item, fn) for item in value)
    return value


def host_tensor(tensor: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    if dtype is not None and tensor.is_floating_point():
        tensor = tensor.to(dtype=dtype)
    return tensor if tensor.is_cpu else tensor.cpu()


def call_processor(
    processor: Any,
    data: Mapping[str, Any],
    kwargs: Mapping[str, Any],
    dtype: torch.dtype | None = None,
) -> dict[str, Any]:
    """Any failure inside the processor surfaces as ValueError, which the callers rely on to
    tell a rejected prompt apart."""
    call_kwargs = accepted_kwargs(processor, kwargs)
    call_kwargs.setdefault("return_tensors", "pt")
    try:
        output = processor(**data, **call_kwargs)
    except Exception as exc:
        raise ValueError(
            f"{type(processor).__name__} failed on inputs {sorted(data)} "
            f"with options {call_kwargs}: {exc}"
        ) from exc
    raw = getattr(output, "data", output)
    return dict(map_tensors(dict(raw), lambda t: host_tensor(t, dtype)))


def tokenizer_of(processor: Any) -> Any:
    return processor.tokenizer


def encode_plain(tokenizer: Any, text: str) -> list[int]:
    """Token ids of `text` with no special tokens added around it."""
    return list(tokenizer.encode(text, add_special_tokens=False))


def encode_prompt(tokenizer: Any, prompt: str | list[int]) -> list[int]:
    if isinstance(prompt, str):
        return list(tokenizer.encode(prompt, add_special_tokens=True))
    return list(prompt)


def input_ids_tensor(ids: list[int]) -> torch.Tensor:
    return torch.tensor([ids])
