"""`conformance check`: every applicable check on one checkpoint, for a contributor.

The checkpoint is a local folder or a hub id (fetched with huggingface_hub, honouring
HF_HUB_OFFLINE). No fixture needs to be built: the recipe is that of the fixture with the
checkpoint's architecture (whose known findings then apply), else one derived from the
checkpoint's own config and processor. Native vLLM is the oracle where vLLM has a native model,
HF otherwise. Whether vLLM serves it, and whose problem it is when it does not, is
`subjects/serving.py`'s question.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from fixtures.recipe import Recipe
from fixtures.registry import recipes_by_architecture
from impl.info import supported_modalities

HUB_ID = re.compile(r"^[\w.\-]+/[\w.\-]+$")
HUB_FILES = ["*.json", "*.jinja", "*.model", "*.txt", "*.safetensors", "tekken.json"]

class CheckpointError(ValueError):
    """A one-line, user-facing reason why a checkpoint cannot be checked."""


def resolve(ref: str) -> Path:
    """A local checkpoint folder, or a hub id downloaded (or found offline) to one."""
    path = Path(ref).expanduser()
    if path.exists():
        if not path.is_dir() or not (path / "config.json").is_file():
            raise CheckpointError(f"{ref} is not a checkpoint folder (no config.json in it)")
        return path
    if not HUB_ID.match(ref):
        raise CheckpointError(f"{ref}: no such folder, and not a hub id of the form owner/name")
    from huggingface_hub import snapshot_download

    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")
    try:
        return Path(snapshot_download(ref, allow_patterns=HUB_FILES, local_files_only=offline))
    except Exception as error:
        if offline:
            raise CheckpointError(f"{ref} is not in the local hub cache and HF_HUB_OFFLINE is set:"
                                  " unset it to download, or pass a local folder") from error
        raise CheckpointError(f"cannot fetch {ref} from the hub: "
                              f"{type(error).__name__}: {error}") from error


def recipe_for(path: Path, ref: str) -> Recipe:
    """A recipe for the checkpoint. Where a fixture has its architecture (and, where several
    do, its processor and vision tower), that fixture's recipe: its prompt, placeholder text,
    option sets and known findings apply to every checkpoint of the architecture. Otherwise one
    derived from the checkpoint: its processor's modalities and placeholder text, and whether
    vLLM has a native model for it."""
    from transformers import AutoConfig, AutoProcessor

    # lazy: impl.dummy imports numpy (+0.14 s), which naming a checkpoint's fixture needs not
    from impl.dummy import dummy_text

    try:
        config = AutoConfig.from_pretrained(path)
        processor = AutoProcessor.from_pretrained(path)
    except Exception as error:
        raise CheckpointError(f"{path}: transformers cannot load its config or processor: "
                              f"{type(error).__name__}: {error}") from error
    architecture = (getattr(config, "architectures", None) or ["?"])[0]
    try:
        modalities = tuple(supported_modalities(processor))
    except ValueError as error:
        raise CheckpointError(f"{architecture} cannot be served by the Transformers backend as "
                              f"multimodal: {error}") from error
    family = matching_fixture(architecture, config, processor)
    if family is not None:
        return replace(family, make=_no_build, mirrors=ref)
    return Recipe(
        name=checkpoint_name(ref), architecture=architecture, modalities=modalities,
        placeholder={m: dummy_text(processor, {m: 1}) for m in modalities},
        prompt="Describe {0} and compare it with {1}.", make=_no_build, mirrors=ref,
        native_in_vllm=has_native_model(architecture),
    )


def checkpoint_name(ref: str) -> str:
    """A short name for a checkpoint without a fixture of its architecture (reports, files)."""
    return re.sub(r"[^\w.\-]+", "_", Path(ref.rstrip("/")).name) or "checkpoint"


def layout(config: Any, processor: Any) -> tuple[str, str | None]:
    vision = getattr(config, "vision_config", None)
    return type(processor).__name__, getattr(vision, "model_type", None)


def matching_fixture(architecture: str, config: Any, processor: Any) -> Recipe | None:
    """The fixture recipe of the checkpoint's architecture; where several recipes share it
    (LLaVA with a CLIP or a Pixtral tower), the one with the same processor and vision tower."""
    same = recipes_by_architecture().get(architecture, [])
    if len(same) <= 1:
        return same[0] if same else None
    wanted = layout(config, processor)
    for recipe in same:
        parts = recipe.make("tiny")  # config and processor objects only: nothing is trained
        if layout(parts.config, parts.processor) == wanted:
            return recipe
    return None


def _no_build(profile: str):
    raise CheckpointError("this recipe describes an existing checkpoint; it builds nothing")


def has_native_model(architecture: str) -> bool:
    from vllm.model_executor.models.registry import ModelRegistry

    return architecture in ModelRegistry.get_supported_archs()
