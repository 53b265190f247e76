"""Whose problem a failure of `conformance check` is: the checkpoint's (or transformers'), or
the backend's.

The backend serves a checkpoint through transformers, so where transformers itself cannot load
it (its config unreadable, a tokenizer file missing, its weights missing or of other shapes than
its config makes), or where native vLLM fails it the same way, a failed cell says nothing about
the backend. Two steps, both here:
- `probe_files` / `probe_weights`: before any check runs, does the checkpoint load in
  transformers; the problem names its cause (the file, the tensor and its shapes, the
  exception);
- `attribute`: each failed cell's owner, from the probe and from the references' outcomes the
  cell recorded (a model check keeps each reference's error under `references`).
A failed cell with no owner here is the backend's (`new`, listed under "What to fix").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.checks.contract import HF_REF, NATIVE_REF, REFERENCES
from conformance.results.cells import one_line
from conformance.results.verdict import BAD, Verdict, owner_text
from conformance.run.logs import error_line

CHECKPOINT = "the checkpoint's problem"
TRANSFORMERS = "the checkpoint's or transformers' problem"  # transformers raises on sound files
VLLM = "vLLM's problem"  # native vLLM fails the same way; the HF model does not
# The files transformers reads the weights from, in the order it looks for them
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
LIMIT = 300  # characters of an exception's message kept on the one line


@dataclass(frozen=True)
class Problem:
    """Why a cell's failure is not the backend's: its owner and the cause, on one line."""

    owner: str  # CHECKPOINT, TRANSFORMERS or VLLM
    part: str  # what does not load: "config", "processor", "weights", "model"
    cause: str
    # where the owner is not surely the checkpoint, the exception (`same_words`): the cells it
    # explains are those that failed with it, not a backend failing its own way
    error: str = ""

    def line(self) -> str:
        return owner_text(self.owner, self.cause)


def quoted(error: BaseException, limit: int = LIMIT) -> str:
    return error_line(error, limit)


def probe_files(path: Path) -> Problem | None:
    """The config and the processor (tokenizer included) as transformers loads them."""
    from transformers import AutoConfig, AutoProcessor

    try:
        AutoConfig.from_pretrained(path)
    except Exception as error:
        return config_problem(path, error)
    try:
        AutoProcessor.from_pretrained(path)
    except Exception as error:
        missing = missing_tokenizer_files(path)
        if missing:
            return Problem(CHECKPOINT, "processor",
                           f"{missing} (transformers: {quoted(error, LIMIT // 2)})")
        return Problem(TRANSFORMERS, "processor",
                       f"transformers cannot load its processor: {quoted(error)}")
    return None


def config_problem(path: Path, error: BaseException) -> Problem:
    config = path / "config.json"
    try:
        json.loads(config.read_text())
    except (OSError, ValueError) as unreadable:  # the file itself, not transformers
        return Problem(CHECKPOINT, "config", f"{config.name} is not readable JSON: "
                                             f"{quoted(unreadable)}")
    return Problem(TRANSFORMERS, "config",
                   f"transformers cannot load its config.json: {quoted(error)}")


def missing_tokenizer_files(path: Path) -> str | None:
    """The tokenizer's files that are not there, from the class tokenizer_config.json names:
    it reads tokenizer.json, or else every file of its slow vocabulary (None: they are there,
    or the class is unknown, so transformers' own error stands)."""
    from transformers.models.auto.tokenization_auto import tokenizer_class_from_name

    try:
        name = json.loads((path / "tokenizer_config.json").read_text())["tokenizer_class"]
        files = dict(tokenizer_class_from_name(name).vocab_files_names)
    except Exception:
        return None
    fast = files.pop("tokenizer_file", None)
    if (fast and (path / fast).is_file()) or (files and all(
            (path / file).is_file() for file in files.values())):
        return None
    wanted = " or ".join(filter(None, [fast, " + ".join(files.values())]))
    lacks = [file for file in filter(None, [fast, *files.values()]) if not (path / file).is_file()]
    return (f"a tokenizer file is missing: {name} (tokenizer_config.json) reads {wanted}; the "
            f"folder lacks {', '.join(lacks)}")


def probe_weights(recipe: Any, path: str, device: str, dtype: str) -> Problem | None:
    """The weights, loaded by transformers into the checkpoint's own class: the HF model the
    model checks compare with (cached: they reuse it). Only on failure is anything else read."""
    # this module is imported by `conformance check`'s at its top
    # lazy: the model checks' package loads torch (+0.9 s on every command's start)
    from conformance.checks.model.hf_reference import generation_model

    try:
        generation_model(recipe, path, device, dtype)
    except Exception as error:
        return weights_problem(recipe, Path(path), error)
    return None


def weights_problem(recipe: Any, path: Path, error: BaseException) -> Problem:
    present = [name for name in WEIGHT_FILES if (path / name).is_file()]
    present += [p.name for p in sorted(path.glob("*.safetensors")) if p.name not in present]
    if not present:
        return Problem(CHECKPOINT, "weights",
                       f"no weights file in the folder (transformers reads "
                       f"{', '.join(WEIGHT_FILES)}): {quoted(error)}")
    if mismatched := mismatched_tensors(recipe, path):  # transformers' error only points there
        return Problem(CHECKPOINT, "weights",
                       f"its weights do not fit its config ({', '.join(present)}; "
                       f"transformers' loading report): {mismatched}")
    return Problem(TRANSFORMERS, "model",
                   f"transformers cannot load the model ({', '.join(present)}): "
                   f"{quoted(error)}", error=same_words(f"{type(error).__name__}: {error}"))


def mismatched_tensors(recipe: Any, path: Path) -> str | None:
    """The tensors whose shape differs from the one the config makes, from transformers'
    loading report (the load again, keeping the mismatched tensors out)."""
    import transformers
    from transformers.utils import logging as hf_logging

    # lazy: the model checks' package loads torch (as probe_weights')
    from conformance.checks.model.loading import hf_init_context

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the report is read, not printed
    try:
        with hf_init_context(str(path)):
            _, info = getattr(transformers, recipe.architecture).from_pretrained(
                path, output_loading_info=True, ignore_mismatched_sizes=True)
    except Exception:
        return None
    finally:
        hf_logging.set_verbosity(verbosity)
    rows = sorted(info.get("mismatched_keys") or [], key=str)
    if not rows:
        return None
    shown = [f"{row[0]} is {list(row[1])} in the checkpoint, {list(row[2])} by the config"
             if isinstance(row, tuple) and len(row) == 3 else str(row) for row in rows[:3]]
    more = f" (and {len(rows) - 3} more)" if len(rows) > 3 else ""
    return "; ".join(shown) + more


def attribute(verdict: Verdict, weights: Problem | None, loads_model: bool) -> Problem | None:
    """The owner of a failed cell other than the backend (None: the backend's, or no failure).

    A check that loads the model fails with weights transformers cannot load: the probe's
    problem (one not surely the checkpoint's only where the cell failed with its error). A
    cell whose backend failed the same way as every reference that failed is theirs: the HF
    model failing so makes it the checkpoint's or transformers', native vLLM alone vLLM's."""
    if verdict.status not in BAD:
        return None
    if loads_model and weights is not None and (
            weights.owner == CHECKPOINT
            or (weights.error and weights.error in one_line(verdict.observed, None))):
        return weights
    return same_failure(verdict.data)


def same_words(text: str) -> str:
    """The start of an error's text, on one line: what a cell's detail quoting it contains."""
    return " ".join(text.split())[:LIMIT // 2]


def same_failure(data: dict) -> Problem | None:
    """Only the references that failed keep an entry (`error: ...`) in `references`."""
    backend = data.get("backend")
    backend = backend.get("error") if isinstance(backend, dict) else None
    references = {ref: outcome.removeprefix("error: ") for ref, outcome in
                  (data.get(REFERENCES) or {}).items()
                  if ref in (NATIVE_REF, HF_REF) and isinstance(outcome, str)}
    if not backend or not references or any(text != backend for text in references.values()):
        return None
    cause = " ".join(backend.split())[:LIMIT]
    if HF_REF in references:
        fails = "native vLLM and the HF model fail" if NATIVE_REF in references else (
            "the HF model fails")
        return Problem(TRANSFORMERS, "model", f"{fails} the same way: {cause}")
    return Problem(VLLM, "model", f"native vLLM fails the same way (the HF model does not): "
                                  f"{cause}")
