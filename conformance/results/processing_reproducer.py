"""The body of a processing check's standalone reproducer (`processing`, `prompt-ids`,
`placeholders`, `errors`): one prompt through vLLM's Transformers backend and through its
oracle (native vLLM's processor for the same checkpoint, or the HF processor's own expansion),
the first difference, and exit 1 while it reproduces (0: it does not; 2: it cannot tell).

Exported as it is: `results.standalone.script` pastes this source after the failing cell's
constants, with the media makers and the HF expansion the `hf` subject computes
(`subjects.hf_expansion`), and drops the imports of those. So besides them it imports only
vLLM and transformers, and the cell's request comes in as a `Replay`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from conformance.inputs.media import SAMPLING_RATE, make_media, video_metadata
from conformance.subjects.hf_expansion import hf_expansion

CLEAR_ERRORS = (ValueError, RuntimeError, NotImplementedError)
# (prompt ids, per item (offset, length, embedding positions))
Processed = tuple[list[int], list[tuple[int, int, list[int]]]]


@dataclass(frozen=True)
class Replay:
    """The failing cell's request, as the script's constants give it."""

    checkpoint: str | None
    prompt: str
    modality: str
    items: list[tuple[int, int, int, int, int]]  # (height, width, samples, seed, frames)
    options: dict[str, Any]  # model-level processor options (mm_processor_kwargs)
    formats: dict[str, dict[str, str]]  # per impl, its half of a two-format checkpoint
    compare: str  # "ids", "ids+placeholders" or "error" (it must raise a clear error)
    oracle: str  # "vllm" (native vLLM's processor) or "hf" (the HF processor's expansion)
    # the form vLLM is given the options in ("": model-level flat; model-scoped, request-flat,
    # request-scoped, disk): the HF processor takes them flat in any form
    form: str = ""


SCOPES = {"image": "images_kwargs", "audio": "audio_kwargs", "video": "videos_kwargs"}
SUB_CONFIGS = {"image": "image_processor", "audio": "feature_extractor",
               "video": "video_processor"}


def disk_copy(checkpoint: str, options: dict[str, Any], modality: str) -> str:
    """A copy of the checkpoint folder (links to its files) whose processor config holds
    `options`: a flat preprocessor_config.json where it has one, else processor_config.json's
    sub-config of the modality (its top level where it has none)."""
    import json
    import tempfile
    from pathlib import Path

    source, target = Path(checkpoint), Path(tempfile.mkdtemp(prefix="disk-form-"))
    name = ("preprocessor_config.json" if (source / "preprocessor_config.json").is_file()
            else "processor_config.json")
    content = json.loads((source / name).read_text()) if (source / name).is_file() else {}
    sub = SUB_CONFIGS[modality]
    if name == "processor_config.json" and isinstance(content.get(sub), dict):
        content[sub] = {**content[sub], **options}
    else:
        content.update(options)
    for entry in source.iterdir():
        if entry.name != name:
            (target / entry.name).symlink_to(entry.resolve())
    (target / name).write_text(json.dumps(content, indent=2))
    return str(target)


def deployment(replay: Replay) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The checkpoint folder, model-level options and the request's own for vLLM, in the
    replay's form."""
    flat, scoped = dict(replay.options), {SCOPES[replay.modality]: dict(replay.options)}
    checkpoint = str(replay.checkpoint)
    if not flat or replay.form in ("", "model-flat"):
        return checkpoint, flat, {}
    return {"model-scoped": (checkpoint, scoped, {}),
            "request-flat": (checkpoint, {}, flat),
            "request-scoped": (checkpoint, {}, scoped),
            "disk": (disk_copy(checkpoint, flat, replay.modality), {}, {})}[replay.form]


def made(replay: Replay) -> list:
    """The items, rebuilt from their specs as the harness made them."""
    return [make_media(replay.modality, *item) for item in replay.items]


def vllm_items(replay: Replay) -> list:
    """vLLM's form: audios with their sampling rate, videos with their metadata."""
    items = made(replay)
    if replay.modality == "video":
        return [(item, video_metadata(len(item))) for item in items]
    return [(item, SAMPLING_RATE) for item in items] if replay.modality == "audio" else items


def vllm_processed(replay: Replay, impl: str) -> Processed:
    """Prompt ids and per item (offset, length, embedding positions), from vLLM's processor
    made by its registry exactly as the engine makes it."""
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY

    checkpoint, model_level, request = deployment(replay)
    config = ModelConfig(model=checkpoint, model_impl=impl,
                         limit_mm_per_prompt={replay.modality: 8},
                         mm_processor_kwargs=model_level or None, mm_processor_cache_gb=0,
                         **replay.formats.get(impl, {}))
    processor = MULTIMODAL_REGISTRY.create_processor(config)
    out = processor(replay.prompt,
                    processor.info.parse_mm_data({replay.modality: vllm_items(replay)}),
                    hf_processor_mm_kwargs=request)
    ranges = []
    for r in out["mm_placeholders"].get(replay.modality, []):
        mask = [True] * r.length if r.is_embed is None else r.is_embed.tolist()
        ranges.append((r.offset, r.length, [r.offset + i for i, e in enumerate(mask) if e]))
    return list(out["prompt_token_ids"]), ranges


def hf_processed(replay: Replay) -> Processed:
    """The HF processor's own expansion, as the harness's `hf` subject computes it."""
    from transformers import AutoConfig, AutoProcessor

    ids, placeholders, _ = hf_expansion(
        AutoProcessor.from_pretrained(replay.checkpoint, **replay.options),
        AutoConfig.from_pretrained(replay.checkpoint), replay.prompt, replay.modality,
        made(replay), sizes=[(h, w, frames) for h, w, _, _, frames in replay.items],
        options=replay.options,
        metadata=[video_metadata(frames) for *_, frames in replay.items])
    return ids, placeholders


def difference(replay: Replay, expected: Processed, actual: Processed,
               names: tuple[str, str]) -> str | None:
    """The first difference of `actual` from `expected`, in words (None: they agree)."""
    (ids_a, ranges_a), (ids_b, ranges_b) = expected, actual
    if ids_a != ids_b:
        i = next((i for i, (x, y) in enumerate(zip(ids_a, ids_b, strict=False)) if x != y),
                 min(len(ids_a), len(ids_b)))
        return (f"prompt ids differ at position {i}: {names[0]} {ids_a[i:i + 6]} vs "
                f"{names[1]} {ids_b[i:i + 6]} (lengths {len(ids_a)} vs {len(ids_b)})")
    if replay.compare == "ids":
        return None
    if len(ranges_a) != len(ranges_b):
        return f"{names[0]} has {len(ranges_a)} placeholders, {names[1]} {len(ranges_b)}"
    for i, (a, b) in enumerate(zip(ranges_a, ranges_b, strict=True)):
        if a != b:
            return (f"{replay.modality} item {i}: (offset, length, embedding positions) "
                    f"{names[0]} {a[:2]} {a[2][:8]} vs {names[1]} {b[:2]} {b[2][:8]}")
    return None


def oracle(replay: Replay) -> Processed:
    return vllm_processed(replay, "vllm") if replay.oracle == "vllm" else hf_processed(replay)


def expect_clear_error(replay: Replay) -> int:
    """The prompt cannot be placed: the backend must raise a clear error, or accept it exactly
    as native vLLM does."""
    try:
        got = vllm_processed(replay, "transformers")
    except CLEAR_ERRORS as error:
        print(f"backend raises a clear error: {type(error).__name__}: {error}")
        return 0
    except AssertionError as error:
        print(f"backend: a bare assertion instead of a clear error: {error!r}")
        return 1
    placed = len(got[1])
    if replay.oracle == "hf":
        print(f"backend: no error; {len(replay.items)} items placed as {placed}")
        return 0 if placed == len(replay.items) else 1
    try:
        native = vllm_processed(replay, "vllm")
    except Exception as error:
        print(f"native vLLM rejects it ({type(error).__name__}: {error}), the backend "
              f"accepts it ({len(replay.items)} items placed as {placed})")
        return 1
    found = difference(replay, native, got, ("native", "backend"))
    print(f"backend: no error, unlike native: {found}" if found else "both accept it alike")
    return 1 if found else 0


def main(replay: Replay, usage: str) -> int:
    """Exit status 1: it reproduces; 0: it does not; 2: it cannot tell (`usage` is printed
    when no checkpoint is given)."""
    if replay.checkpoint is None:
        print(usage, file=sys.stderr)
        return 2
    import transformers
    import vllm

    print(f"vllm {vllm.__version__}, transformers {transformers.__version__}; "
          f"{replay.checkpoint}")
    print(f"prompt {replay.prompt!r} with {len(replay.items)} {replay.modality} item(s)")
    if replay.options:
        print(f"options {dict(replay.options)} given to vLLM {replay.form or 'model-flat'}")
    if replay.compare == "error":
        return expect_clear_error(replay)
    # The backend first: processors write the options their token count is given into their
    # class's defaults, so an oracle run first (the HF processor counts with the options flat)
    # would hand the backend options its own form never gave it.
    try:
        got: Processed | None = vllm_processed(replay, "transformers")
        raised = None
    except Exception as error:
        import traceback

        traceback.print_exc()
        got, raised = None, error
    try:
        expected = oracle(replay)
    except Exception as error:
        print(f"the oracle ({replay.oracle}) cannot process it: {type(error).__name__}: {error}")
        return 2
    if got is None:
        print(f"FAILS: the backend raises {type(raised).__name__}: {raised}")
        return 1
    found = difference(replay, expected, got,
                       ("native" if replay.oracle == "vllm" else "HF", "backend"))
    print(f"FAILS: {found}" if found else "passes: the backend agrees with the oracle")
    return 1 if found else 0
