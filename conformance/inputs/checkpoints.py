"""`conformance check`: every applicable check on one checkpoint, for a contributor.

The checkpoint is a local folder or a hub id (fetched with huggingface_hub, honouring
HF_HUB_OFFLINE). No fixture recipe is needed: one is derived from the checkpoint's own config
and processor. Native vLLM is the oracle where vLLM has a native model, HF otherwise.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from fixtures.recipe import Recipe

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


def recipe_for(path: Path, name: str) -> Recipe:
    """A recipe derived from the checkpoint itself: its architecture, its processor's
    modalities and placeholder text, and whether vLLM has a native model for it."""
    from transformers import AutoConfig, AutoProcessor

    from impl.dummy import dummy_text
    from impl.info import supported_modalities

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
    return Recipe(
        name=name, architecture=architecture, modalities=modalities,
        placeholder={m: dummy_text(processor, {m: 1}) for m in modalities},
        prompt="Describe {0} and compare it with {1}.", make=_no_build, mirrors=str(path),
        native_in_vllm=has_native_model(architecture),
    )


def _no_build(profile: str):
    raise CheckpointError("this recipe describes an existing checkpoint; it builds nothing")


def has_native_model(architecture: str) -> bool:
    from vllm.model_executor.models.registry import ModelRegistry

    return architecture in ModelRegistry.get_supported_archs()


def backend_serves(path: Path, recipe: Recipe) -> None:
    """Raise CheckpointError unless vLLM's Transformers backend builds a processor for it."""
    from conformance.subjects import make_subject

    try:
        _ = make_subject("vllm-backend", str(path), recipe).processor
    except Exception as error:
        message = " ".join(str(error).split())[:300]
        raise CheckpointError(f"{recipe.architecture} cannot be served by vLLM's Transformers "
                              f"backend: {type(error).__name__}: {message}") from error
