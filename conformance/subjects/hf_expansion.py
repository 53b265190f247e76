"""The HF processor's own expansion of a prompt: its ids, and per item the span its modality's
token type marks (cut by the processor's own token counts), with the positions of the model's
token for the modality (what the HF model scatters features into).

One expansion for the `hf` subject and for the standalone reproducers, which paste this
module's source as it is: so it imports nothing but the standard library, and takes the
processor, the config and the items as arguments.
"""

from __future__ import annotations

from typing import Any

HF_TYPE_IDS = {"image": 1, "video": 2, "audio": 3}
HF_MEDIA_KEYS = {"image": "images", "audio": "audio", "video": "videos"}


def embed_token_id(config: Any, modality: str) -> int:
    """The token the HF model scatters this modality's encoder rows into."""
    for name in (f"{modality}_token_id", f"{modality}_token_index"):
        value = getattr(config, name, None)
        if value is not None:
            return int(value)
    raise ValueError(f"{type(config).__name__} names no {modality} token id")


def hf_media(processor: Any, modality: str, items: list,
             metadata: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The items as vLLM's backend hands them to the HF processor. Videos: where the video
    processor samples frames, `metadata` (vLLM's, one per video) with sampling off, since the
    frames are those a decoder kept."""
    media: dict[str, Any] = {HF_MEDIA_KEYS[modality]: items}
    if modality == "video" and \
            getattr(getattr(processor, "video_processor", None), "do_sample_frames", False):
        media["video_metadata"] = [{k: v for k, v in m.items() if k != "do_sample_frames"}
                                   for m in metadata or []]
        media["do_sample_frames"] = False
    return media


def first_row(value: Any) -> list[int]:
    """The first prompt's row of a batched output, a tensor's or a list's."""
    row = value[0]
    return row.tolist() if hasattr(row, "tolist") else list(row)


def token_counts(processor: Any, modality: str, sizes: list[tuple[int, int, int]],
                 options: dict[str, Any]) -> list[int] | None:
    """The processor's own token count per item (`sizes`: height, width, frames), where it
    defines `_get_num_multimodal_tokens` for the modality."""
    counter = getattr(processor, "_get_num_multimodal_tokens", None)
    if counter is None or modality not in ("image", "video"):
        return None
    if modality == "video":  # counted per video since transformers 5.18
        return list(counter(video_sizes=[[f, h, w] for h, w, f in sizes],
                            **options)["num_video_tokens"])
    return list(counter(image_sizes=[[h, w] for h, w, _ in sizes], **options)["num_image_tokens"])


def split_marked(marked: list[int], counts: list[int] | None,
                 marked_ids: list[int] | None = None,
                 embed_token: int | None = None) -> list[list[int]]:
    """Marked positions cut into items: by the counts, else into contiguous runs.

    A count is either every position its item marks (transformers up to 5.24) or only those
    that receive the item's features, the marked positions holding `embed_token`
    (`marked_ids`: the prompt's ids at the marked positions; from transformers 5.25 Aya
    Vision, InternVL, Idefics3 and Pixtral count so). The meaning that adds up exactly is the
    one cut by; counts that add up to neither are an error, since cutting by them would place
    items where the processor put none."""
    if counts is None:
        runs: list[list[int]] = []
        for position in marked:
            if runs and runs[-1][-1] == position - 1:
                runs[-1].append(position)
            else:
                runs.append([position])
        return runs
    if sum(counts) == len(marked):
        spans, start = [], 0
        for count in counts:
            spans.append(marked[start:start + count])
            start += count
        return spans
    if marked_ids is not None and embed_token is not None and all(counts) and \
            sum(counts) == marked_ids.count(embed_token):
        return split_by_embedded(marked, counts, marked_ids, embed_token)
    # worded as the baseline's evidence records it (its signature)
    raise ValueError(f"processor marks {len(marked)} positions but counts {counts}")


def split_by_embedded(marked: list[int], counts: list[int], marked_ids: list[int],
                      embed_token: int) -> list[list[int]]:
    """Marked positions cut into items holding `counts` embedded positions each. An item
    closes with as many marked positions after its last embedded one as the prompt's last
    item does (Aya Vision's <|END_OF_IMG|>, InternVL's </img>: a suffix the same for every
    item); the rest up to the next item's first embedded position opens that item."""
    ends, seen = [], 0
    for index, token in enumerate(marked_ids):  # the index of each item's last embedded one
        seen += token == embed_token
        if len(ends) < len(counts) and seen == sum(counts[:len(ends) + 1]):
            ends.append(index)
    closing = len(marked) - 1 - ends[-1]
    spans, start = [], 0
    for end in ends[:-1]:
        stop = end + 1 + closing
        if embed_token in marked_ids[end + 1:stop]:  # the suffix runs into the next item
            raise ValueError(f"processor marks {len(marked)} positions but counts {counts}")
        spans.append(marked[start:stop])
        start = stop
    spans.append(marked[start:])
    return spans


def hf_expansion(processor: Any, config: Any, prompt: str, modality: str, items: list, *,
                 sizes: list[tuple[int, int, int]], options: dict[str, Any],
                 metadata: list[dict[str, Any]] | None = None,
                 count_options: dict[str, Any] | None = None,
                 ) -> tuple[list[int], list[tuple[int, int, list[int]]], Any]:
    """(prompt ids, per item (offset, length, embedding positions), the processor's outputs)
    of `prompt` with `items` (`sizes`: height, width, frames per item; `options`: the
    processor's call options; `metadata`: vLLM's per video; `count_options`: the options
    its token count takes, where they differ from the call's: flat for a scoped call)."""
    # Videos of different frame counts do not stack into one tensor (LLaVA-OneVision's
    # processor): the expansion is what is compared, so their outputs stay lists.
    out = processor(text=prompt, **hf_media(processor, modality, items, metadata),
                    return_mm_token_type_ids=True,
                    return_tensors=None if modality == "video" else "pt", **options)
    ids = first_row(out["input_ids"])
    type_ids = out.get("mm_token_type_ids", out.get("token_type_ids"))
    if type_ids is not None:
        marked = [i for i, t in enumerate(first_row(type_ids)) if t == HF_TYPE_IDS[modality]]
        counts = token_counts(processor, modality, sizes,
                              options if count_options is None else count_options)
        # the model's token is only needed where the counts leave out the structure tokens
        embed = embed_token_id(config, modality) if counts and sum(counts) != len(marked) \
            else None
        spans = split_marked(marked, counts, [ids[p] for p in marked], embed)
    else:  # older processors mark nothing: runs of the model's own token stand in
        token = embed_token_id(config, modality)
        spans = split_marked([i for i, t in enumerate(ids) if t == token], None)
    if not spans:
        return ids, [], out
    token = embed_token_id(config, modality)
    # An item's marked tokens need not be contiguous (Aya Vision marks `TILE` of the `TILE_1`
    # it writes): its placeholder runs from its first to its last marked token.
    return ids, [(span[0], span[-1] - span[0] + 1,
                  [p for p in range(span[0], span[-1] + 1) if ids[p] == token])
                 for span in spans if span], out
