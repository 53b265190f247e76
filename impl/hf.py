"""Calling the HF processor and its tokenizer the way the backend does."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import torch


def accepted_kwargs(fn: Callable[..., Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Drop the keyword arguments `fn` cannot take; all of them pass if it takes `**kwargs`."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return dict(kwargs)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(kwargs)
    usable = {
        name
        for name, p in params.items()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    return {name: value for name, value in kwargs.items() if name in usable}


def map_tensors(value: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, Mapping):
        return {key: map_tensors(item, fn) for key, item in value.items()}
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
