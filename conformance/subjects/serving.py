"""Can vLLM serve a checkpoint, and if it cannot, whose problem is it: the checkpoint's, the
backend's, or a harness setting (`conformance check` asks before any check runs)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from conformance.core.subjects import VLLM_BACKEND, VLLM_NATIVE
from conformance.inputs.checkpoints import CheckpointError
from conformance.subjects import vllm
from conformance.subjects.context import oracles_for, subject_for
from fixtures.recipe import Recipe


def quote(error: BaseException, limit: int = 400) -> str:
    """vLLM's reason, on one line."""
    return f"{type(error).__name__}: {' '.join(str(error).split())[:limit]}"


def raised_in_backend(error: BaseException) -> bool:
    """Whether the error comes from the Transformers backend's own code."""
    import traceback

    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        frames = traceback.extract_tb(error.__traceback__)
        if any(BACKEND_CODE in frame.filename for frame in frames):
            return True
        error = error.__cause__ or error.__context__
    return False


BACKEND_CODE = "/model_executor/models/transformers/"


def serving(path: Path, recipe: Recipe) -> tuple[Recipe, str | None]:
    """Make sure vLLM serves the checkpoint, and size the recipe to what vLLM allows.

    The backend's processor under the harness's settings is built first (the suites reuse it).
    If it fails, vLLM is asked again with its default settings, to say whose problem it is:
    - vLLM refuses the checkpoint with its defaults altogether: the checkpoint's (CheckpointError),
      unless the refusal comes from the backend's own code where vLLM has no native model;
    - only the backend refuses it: the backend's limitation; the checks run and report it (a
      note is returned);
    - vLLM's defaults accept it and the harness's settings do not: a harness setting
      (CheckpointError naming them: a bug of the harness).
    Returns the recipe with at most as many items per prompt as vLLM's processors allow."""
    where = str(path)
    try:
        limits = vllm.item_limits(subject_for(where, recipe, VLLM_BACKEND).processor)
    except Exception as harness_error:
        return recipe, diagnose(where, recipe, harness_error)
    if recipe.native_in_vllm:
        try:
            native = vllm.item_limits(oracles_for(where, recipe)[VLLM_NATIVE].processor)
            limits = {m: min(n, native.get(m, n)) for m, n in limits.items()}
        except Exception:  # the oracle's failure is each cell's `error`, with its reason
            pass
    allowed = min((limits.get(m, recipe.max_items) for m in recipe.modalities),
                  default=recipe.max_items)
    return replace(recipe, max_items=max(1, min(recipe.max_items, allowed))), None


def diagnose(path: str, recipe: Recipe, harness_error: BaseException) -> str:
    name = recipe.architecture
    try:
        vllm.processor_from(vllm.default_model_config(path, vllm.BACKEND))
    except Exception as backend_error:
        try:
            config = vllm.default_model_config(path)
            vllm.processor_from(config)
        except Exception as default_error:
            if not recipe.native_in_vllm and raised_in_backend(default_error):
                return backend_limitation(name, "vLLM has no native model for it",
                                          default_error)
            raise CheckpointError(
                f"vLLM refuses this {name} checkpoint with its default settings, so the "
                f"checkpoint is at fault, not the Transformers backend: "
                f"{quote(default_error)}") from default_error
        served = f"vLLM serves it with its default settings (model_impl={config.model_impl!r})"
        return backend_limitation(name, served, backend_error)
    raise CheckpointError(
        f"a harness setting: vLLM's Transformers backend serves this {name} checkpoint with its "
        f"default settings but not with the harness's ({vllm.MAX_ITEMS} items per prompt, "
        f"processor options): {quote(harness_error)}") from harness_error


def backend_limitation(name: str, served: str, error: BaseException) -> str:
    return (f"the backend's limitation: {served}, but its Transformers backend refuses this "
            f"{name} checkpoint: {quote(error)}. The checks run and report it.")
