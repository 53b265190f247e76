"""`process`: one prompt and its media through either placeholder strategy (from vLLM 0.32.0,
`OFFSETS_ONLY`, through the offsets strategy alone)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from impl.cache import ProcessorCache
from impl.dummy import dummy_text
from impl.fields import field_specs, modality_field_names, split_items
from impl.hashing import ItemHashes, media_hashes
from impl.hf import call_processor, encode_prompt, input_ids_tensor, tokenizer_of
from impl.info import audio_sampling_rate, supported_modalities, video_needs_metadata
from impl.legacy import (
    audio_placeholders,
    check_image_token_total,
    image_size_hw,
    image_typed_positions,
    mm_token_ids,
    require_type_ids,
    split_image_placeholders,
)
from impl.offsets import (
    bind_replacements,
    build_replacements,
    missing_offsets_error,
    offset_entries,
    record_replacements,
    replacement_token_ids,
)
from impl.options import call_options
from impl.release import DEFAULT, OFFSETS_ONLY, OPTION_SCOPES, Profile
from impl.replace import Replacement, expand_prompt
from impl.types import Placeholder, ProcessedPrompt
from impl.unpad import apply_unpad_images, unpad_audios
from impl.version import placeholder_strategy
from impl.video import normalise_video, split_video_metadata

STRATEGIES = ("legacy", "offsets")

Media = dict[str, list[Any]]


@dataclass(frozen=True)
class ModelLevel:
    """The processor built under the model-level options alone, and those options: what the
    backend reads in place of a request's in a few steps, so a request's options never reach
    them. The Offsets path counts each image's rows with both; the Legacy path counts image
    tokens with the options (on the processor the request built) and takes each modality's
    token ids from this processor."""

    processor: Any
    kwargs: Mapping[str, Any]


def strategy_for(version: str, profile: Profile = DEFAULT) -> str:
    """The placeholder strategy for a transformers version: offsets from 5.15.0 on, and on
    every version once the backend dropped the Legacy path (`OFFSETS_ONLY`)."""
    if profile.has(OFFSETS_ONLY):
        return "offsets"
    return placeholder_strategy(version)


def installed_strategy(profile: Profile = DEFAULT) -> str:
    import transformers  # lazy: the version is only asked for when no strategy is given

    return strategy_for(transformers.__version__, profile)


def normalise_audio(item: Any, target_rate: float) -> np.ndarray:
    if isinstance(item, tuple):
        audio, rate = item
        if rate is not None and float(rate) != float(target_rate):
            raise NotImplementedError(
                f"audio at {rate} Hz must be resampled to {target_rate} Hz before processing"
            )
        item = audio
    if isinstance(item, torch.Tensor):
        return item.numpy()
    return np.asarray(item) if isinstance(item, list) else item


def parse_media(
    processor: Any,
    mm_data: Mapping[str, Sequence[Any]],
    *,
    profile: Profile = DEFAULT,
    processor_kwargs: Mapping[str, Any] | None = None,
) -> Media:
    """Each modality's items as processing takes them (and hashes them); a modality not
    served is an error. `processor_kwargs`: the model-level options (video is served where
    the processor counts video tokens under them)."""
    supported = supported_modalities(processor, processor_kwargs, profile=profile)
    media: Media = {}
    for modality, items in mm_data.items():
        if modality not in supported:
            raise ValueError(f"{modality} is not served for this model (serves {supported})")
        if modality == "audio":
            rate = audio_sampling_rate(processor)
            media[modality] = [normalise_audio(item, rate) for item in items]
        elif modality == "video":
            needs = video_needs_metadata(processor, profile=profile)
            media[modality] = [normalise_video(item, needs) for item in items]
        else:
            media[modality] = list(items)
    return media


def processor_data(media: Media) -> dict[str, list[Any]]:
    """Media under the HF processor's argument names; modalities without items are left out.
    Each call gets lists of its own: a processor may write into the list it is given
    (VibeVoice's feature extractor stores each normalised audio back in it), and the items'
    hashes are read from `media` afterwards."""
    names = {"image": "images", "audio": "audio", "video": "videos"}
    return {names[modality]: list(items) for modality, items in media.items() if items}


def reprocess_audios(
    processor: Any,
    hf_inputs: dict[str, Any],
    data: Mapping[str, Any],
    call_kwargs: Mapping[str, Any],
    dtype: torch.dtype | None,
) -> None:
    def alone(audio: Any) -> dict[str, Any]:
        text = dummy_text(processor, {"audio": 1})
        return call_processor(processor, {"text": text, "audio": [audio]}, call_kwargs, dtype)

    names = modality_field_names(processor, "audio")
    hf_inputs.update(unpad_audios(hf_inputs, data.get("audio"), names, alone))


def offsets_call_options(
    model: ModelLevel, kwargs: Mapping[str, Any], request: Mapping[str, Any] | None,
    added: Mapping[str, Any], *, profile: Profile = DEFAULT,
) -> dict[str, Any]:
    """The options of the Offsets path's processor calls: the options `added` for the call
    (the videos' `do_sample_frames`), those given (`kwargs`), and untruncated text. From
    `OPTION_SCOPES` on, the call's own options join the request's (`request`, None: none) below
    them and all are merged over the model's: `kwargs`, merged already, are not read."""
    if not profile.has(OPTION_SCOPES):
        return {**added, **kwargs, "truncation": False}
    layer = {**added, "truncation": False, **(request or {})}
    return call_options(model.kwargs, layer, profile=profile)


def offsets_hf_inputs(
    processor: Any, media: Media, kwargs: Mapping[str, Any], dtype: torch.dtype | None,
    model: ModelLevel | None = None, *, profile: Profile = DEFAULT,
    request: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Media processed beside a dummy prompt, with each item's replacement recorded; each
    image's rows counted at the `model` level (default: `processor` and `kwargs`). Videos
    carrying metadata pass it on, with their `do_sample_frames` as a call option that the
    given options override (`offsets_call_options`; `request`: the request's own options)."""
    data: dict[str, Any] = processor_data(media)
    if not data:
        return {}
    model = model or ModelLevel(processor, kwargs)
    tokenizer = tokenizer_of(processor)
    call_kwargs = offsets_call_options(model, kwargs, request, split_video_metadata(data),
                                       profile=profile)
    counts = {modality: len(items) for modality, items in media.items()}
    text = dummy_text(processor, counts, profile=profile, processor_kwargs=model.kwargs)
    if has_media := any(data.values()):
        data = {**data, "return_text_replacement_offsets": True}
    try:
        hf_inputs = call_processor(processor, {"text": text, **data}, call_kwargs, dtype)
    except ValueError:
        if any(data.values()):
            raise
        hf_inputs = {"input_ids": input_ids_tensor(list(tokenizer.encode(text)))}
    apply_unpad_images(hf_inputs)
    reprocess_audios(processor, hf_inputs, data, call_kwargs, dtype)

    # the model rejects these
    hf_inputs.pop("mm_token_type_ids", None)
    hf_inputs.pop("token_type_ids", None)

    entries = offset_entries(hf_inputs.pop("text_replacement_offsets", None))
    if entries is None:
        if has_media:
            raise missing_offsets_error(processor, profile=profile)
        hf_inputs.pop("input_ids", None)
        return hf_inputs
    replacements = replacement_token_ids(tokenizer, entries)
    # the rows are counted with the options of a call no request gave any to
    record_replacements(hf_inputs, replacements, model.processor, data.get("images"),
                        call_options(model.kwargs, {}, profile=profile), profile=profile)
    hf_inputs.pop("input_ids")
    return hf_inputs


def require_counts(found: Mapping[str, Sequence[Any]], counts: Mapping[str, int],
                   what: str) -> None:
    """Per modality, as many `found` entries as items given, else the backend's error naming
    `what` was found (its three count checks differ only in that wording)."""
    for modality, count in counts.items():
        number = len(found.get(modality, []))
        if number != count:
            raise RuntimeError(f"{count} {modality} item(s) given but " + what.format(number))


def check_item_counts(items: Mapping[str, Sequence[Any]], counts: Mapping[str, int]) -> None:
    require_counts(items, counts, "the processed outputs describe {}")


def check_update_counts(
    updates: Mapping[str, Sequence[Replacement]], counts: Mapping[str, int]
) -> None:
    require_counts(updates, counts, "{} prompt replacement(s) exist; is a placeholder missing "
                                    "from the prompt (or the chat template unapplied)?")


def check_placeholder_counts(
    placeholders: Mapping[str, Sequence[Placeholder]], counts: Mapping[str, int]
) -> None:
    require_counts(placeholders, counts, "{} placeholder(s) located in the prompt; the prompt "
                                         "needs one placeholder per item.")


def processed_items(
    processor: Any, media: Media, kwargs: Mapping[str, Any], dtype: torch.dtype | None,
    model: ModelLevel | None = None, *, profile: Profile = DEFAULT,
    request: Mapping[str, Any] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Per modality, each item's fields, its replacement ids among them."""
    hf_inputs = offsets_hf_inputs(processor, media, kwargs, dtype, model, profile=profile,
                                  request=request)
    return split_items(hf_inputs, field_specs(processor, hf_inputs, profile=profile))


def cached_items(
    processor: Any,
    media: Media,
    kwargs: Mapping[str, Any],
    dtype: torch.dtype | None,
    cache: ProcessorCache,
    hashes: Mapping[str, Sequence[str]],
    model: ModelLevel | None = None,
    *,
    profile: Profile = DEFAULT,
    request: Mapping[str, Any] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """The items the cache holds, and the others processed together without them (and then
    stored), in the request's order."""
    found = {m: [cache.get(key) for key in hashes[m]] for m in media}
    missing = {m: [item for item, hit in zip(items, found[m], strict=True) if hit is None]
               for m, items in media.items()}
    fresh = processed_items(processor, {m: its for m, its in missing.items() if its}, kwargs,
                            dtype, model, profile=profile,
                            request=request) if any(missing.values()) else {}
    merged: dict[str, list[dict[str, Any]]] = {}
    for modality, hits in found.items():
        new = iter(fresh.get(modality, []))
        merged[modality] = []
        for key, hit in zip(hashes[modality], hits, strict=True):
            if hit is None and (hit := next(new, None)) is not None:
                cache.put(key, hit)
            if hit is not None:  # fewer items than given: the count check below says so
                merged[modality].append(hit)
    return {m: items for m, items in merged.items() if items}


def run_offsets(
    processor: Any,
    prompt_ids: list[int],
    media: Media,
    kwargs: Mapping[str, Any],
    dtype: torch.dtype | None,
    cache: ProcessorCache | None = None,
    hashes: Mapping[str, Sequence[str]] | None = None,
    model: ModelLevel | None = None,
    *,
    profile: Profile = DEFAULT,
    request: Mapping[str, Any] | None = None,
) -> tuple[list[int], dict[str, list[Placeholder]], dict[str, list[dict[str, Any]]]]:
    counts = {modality: len(items) for modality, items in media.items()}
    if cache is None or hashes is None:
        items = processed_items(processor, media, kwargs, dtype, model, profile=profile,
                                request=request)
    else:
        items = cached_items(processor, media, kwargs, dtype, cache, hashes, model,
                             profile=profile, request=request)
    tokenizer = tokenizer_of(processor)
    updates = bind_replacements(build_replacements(processor, tokenizer, items), counts)
    check_item_counts(items, counts)
    check_update_counts(updates, counts)
    expanded, placeholders = expand_prompt(prompt_ids, updates, tokenizer)
    check_placeholder_counts(placeholders, counts)
    return expanded, placeholders, items


def run_legacy(
    processor: Any,
    prompt_ids: list[int],
    media: Media,
    kwargs: Mapping[str, Any],
    config: Any,
    dtype: torch.dtype | None,
    model: ModelLevel | None = None,
) -> tuple[list[int], dict[str, list[Placeholder]], dict[str, list[dict[str, Any]]]]:
    counts = {modality: len(items) for modality, items in media.items()}
    model = model or ModelLevel(processor, kwargs)
    tokenizer = tokenizer_of(processor)
    prompt_text = processor.decode(prompt_ids)
    # the decoded text already holds its special tokens; nothing may be truncated away
    call_kwargs = {**kwargs, "truncation": False, "add_special_tokens": False}
    data: dict[str, Any] = processor_data(media)
    if has_media := any(data.values()):
        # the only marking of the structure tokens an expansion adds around an item
        data = {**data, "return_mm_token_type_ids": True}
    try:
        out = call_processor(processor, {"text": prompt_text, **data}, call_kwargs, dtype)
    except ValueError:
        if has_media:
            raise
        # some processors refuse placeholders without media; take the prompt as plain text
        out = {"input_ids": input_ids_tensor(list(tokenizer.encode(prompt_text)))}
    apply_unpad_images(out)
    reprocess_audios(processor, out, data, call_kwargs, dtype)

    input_ids = out.pop("input_ids")
    if not isinstance(input_ids, list):
        input_ids = input_ids.tolist()
    (expanded,) = input_ids
    expanded = list(expanded)
    # Gemma3 names them after the model's own token types
    type_ids = out.pop("token_type_ids", None)
    type_ids = out.pop("mm_token_type_ids", type_ids)

    placeholders: dict[str, list[Placeholder]] = {}
    if num_audios := counts.get("audio", 0):
        audio_ids = mm_token_ids(model.processor, config, tokenizer, "audio")
        placeholders["audio"] = audio_placeholders(expanded, audio_ids, num_audios)
        out["num_audio_tokens"] = torch.tensor([p.length for p in placeholders["audio"]])
    if num_images := counts.get("image", 0):
        name = type(processor).__name__
        require_type_ids(type_ids, name)
        positions = image_typed_positions(type_ids)
        sizes = [image_size_hw(image) for image in media["image"]]
        # the processor the request built, asked with the model-level options only: the
        # backend's count there takes no request option but those the processor was built with
        mm_counts = processor._get_num_multimodal_tokens(image_sizes=sizes, **dict(model.kwargs))
        split = list(mm_counts["num_image_tokens"])
        check_image_token_total(positions, split, name, num_images)
        if split:
            image_ids = mm_token_ids(model.processor, config, tokenizer, "image")
            placeholders["image"] = split_image_placeholders(expanded, positions, split, image_ids)
        out["num_image_patches"] = torch.tensor(mm_counts["num_image_patches"])

    items = split_items(out, field_specs(processor, out))
    check_item_counts(items, counts)
    check_placeholder_counts(placeholders, counts)
    return expanded, placeholders, items


def process(
    processor: Any,
    prompt: str | list[int],
    mm_data: Mapping[str, Sequence[Any]],
    *,
    strategy: str | None = None,
    processor_kwargs: Mapping[str, Any] | None = None,
    request_kwargs: Mapping[str, Any] | None = None,
    request_processor: Any = None,
    config: Any = None,
    dtype: torch.dtype | None = None,
    cache: ProcessorCache | None = None,
    model_id: str = "",
    profile: Profile = DEFAULT,
) -> ProcessedPrompt:
    """Expand `prompt` for its media and cut the processed media into per-item fields.

    `processor` is built under the model-level processor options `processor_kwargs` (passed to
    every processor call and to its token counting). `request_kwargs` are one request's own
    options (its `mm_processor_kwargs`), each overriding the model-level option of its name;
    `request_processor` is the processor built under both (default `processor`), which then
    makes every call: only the count of each image's rows keeps `processor` and the model-level
    options (see `ModelLevel`). `config` is the model's HF config, consulted by the legacy
    strategy for token ids. `strategy` defaults to the one the installed transformers calls
    for. `cache`: a processor cache the Offsets path takes items from and stores them in, under
    the hash of `model_id`, the item and both levels of options (the Legacy path never
    consults it). `profile`: the vLLM release whose backend to follow (default 0.31.0); from
    `OFFSETS_ONLY` on the strategy is always offsets and asking for legacy is an error.
    """
    strategy = strategy or installed_strategy(profile)
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose from {STRATEGIES}")
    if strategy == "legacy" and profile.has(OFFSETS_ONLY):
        raise ValueError(f"vLLM {profile.name}'s backend has no legacy strategy: placeholders "
                         "come from text_replacement_offsets on every transformers version")
    model = ModelLevel(processor, dict(processor_kwargs or {}))
    request = dict(request_kwargs or {})
    # the request's options over the model's (`impl.options`: from OPTION_SCOPES, merged)
    kwargs = call_options(model.kwargs, request, profile=profile)
    caller = processor if request_processor is None else request_processor
    media = parse_media(processor, mm_data, profile=profile, processor_kwargs=model.kwargs)
    prompt_ids = encode_prompt(tokenizer_of(processor), prompt)
    # read only by the cache check, so computed on first read, unless the cache needs them now
    known = media_hashes(model_id, media, model.kwargs, request) if cache is not None else None
    if strategy == "offsets":
        expanded, placeholders, items = run_offsets(caller, prompt_ids, media, kwargs, dtype,
                                                    cache, known, model, profile=profile,
                                                    request=request)
    else:
        expanded, placeholders, items = run_legacy(
            caller, prompt_ids, media, kwargs, config, dtype, model
        )
    return ProcessedPrompt(
        prompt_ids=tuple(int(t) for t in expanded),
        placeholders={m: tuple(ps) for m, ps in placeholders.items()},
        item_fields=items,
        item_hashes=ItemHashes(
            lambda: known if known is not None else media_hashes(model_id, media, model.kwargs,
                                                                 request)
        ),
    )
