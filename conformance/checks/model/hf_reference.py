"""What transformers itself computes for the model checks: the HF model of the checkpoint (its
own class, with the language-model head), fed the HF processor's outputs, never vLLM's.

Three readings of one forward pass, each the HF counterpart of what a model check compares:
- `decode`: greedy tokens and each step's top logprobs (`generate`'s raw logits, log-softmaxed
  in float32, as vLLM's default `raw_logprobs` are);
- `item_embeddings`: per item, processed alone, the rows the HF model's forward merges into
  the language model's input at the positions of the modality's own token (what the backend's
  `embed_multimodal` must return for that item);
- `mrope_positions`: the M-RoPE positions the HF model's forward hands its language model
  (and the decode delta they imply), for the prompt as the HF processor expands it.

Both embeddings and positions are read at the language model's input (a forward pre-hook),
so they are what the HF model uses, whatever helper (`get_image_features`, `get_rope_index`)
each release routes them through.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from conformance.checks.model.loading import CACHE, build_hf_model, cache_key
from conformance.checks.model.references import GENERATE_TOKENS, Decoded
from conformance.checks.model.reproducer import greedy_steps
from conformance.inputs.media import mm_data
from conformance.subjects.hf import embed_token_id
from fixtures.recipe import Recipe
from impl.hf import load_processor

HF_REFERENCE = "hf-lm"  # CACHE kind: the HF model with its head


def generation_model(recipe: Recipe, path: str, device: str, dtype: str) -> Any:
    """The checkpoint's own HF class (`recipe.architecture`), as transformers serves it."""

    def build() -> Any:
        import transformers

        return build_hf_model(path, device, dtype, getattr(transformers, recipe.architecture))

    return CACHE.get(cache_key(HF_REFERENCE, path, recipe.architecture, device, dtype), build)


def eager(model: Any) -> Any:
    """The model as transformers runs it. Loading vLLM's backend decorates transformers' model
    classes process-wide with vLLM's compile wrapper, whose `__call__` reads an attribute only
    instances built after the decoration have: every decorated module here runs its plain
    forward, whichever was loaded first."""
    for module in model.modules():
        if getattr(type(module).__call__, "__module__", "") == "vllm.compilation.decorators":
            module.do_not_compile = True
    return model


def processor(path: str) -> Any:
    return CACHE.get(cache_key("hf-processor", path, "", "cpu", ""),
                     lambda: load_processor(path, {}))


def hf_inputs(path: str, prompt: str, modality: str, items: list, device: str,
              dtype: str, without: tuple[str, ...] = ()) -> Any:
    """The HF processor's outputs for the prompt and its items, on `device`; floating
    fields in the model's precision; `without`: outputs left out (an ablation)."""
    import torch

    media = mm_data(modality, items)
    kwargs: dict[str, Any] = {}
    if not items:  # a text-only request
        pass
    elif modality == "audio":
        kwargs["audio"] = [wave for wave, _ in media["audio"]]
    else:
        kwargs[{"image": "images", "video": "videos"}[modality]] = media[modality]
    out = processor(path)(text=prompt, return_tensors="pt", **kwargs)
    return {k: (v.to(device, getattr(torch, dtype)) if v.is_floating_point() else v.to(device))
            if isinstance(v, torch.Tensor) else v for k, v in out.items() if k not in without}


@contextlib.contextmanager
def language_model_inputs(model: Any) -> Iterator[list[dict[str, Any]]]:
    """Every call's keyword inputs to the model's language model, recorded. Its `forward` is
    wrapped on the instance (not hooked): vLLM's compile wrapper, once the backend decorated
    the class, calls `forward` directly and so skips module hooks."""
    seen: list[dict[str, Any]] = []
    decoder = model.get_decoder()
    if decoder is model:  # transformers 5.12's Qwen2.5-Omni thinker answers with itself
        decoder = next(m for m in (getattr(model, "language_model", None),
                                   getattr(model, "model", None), model) if m is not None)
    forward = decoder.forward

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append({k: v for k, v in kwargs.items() if k in ("inputs_embeds", "position_ids")})
        return forward(*args, **kwargs)

    decoder.forward = recording
    try:
        yield seen
    finally:
        del decoder.forward


def forward_inputs(recipe: Recipe, path: str, device: str, dtype: str, prompt: str,
                   modality: str, items: list) -> tuple[list[int], dict[str, Any]]:
    """The HF prompt ids and what one forward pass over them hands the language model."""
    import torch

    model = eager(generation_model(recipe, path, device, dtype))
    inputs = hf_inputs(path, prompt, modality, items, device, dtype)
    with language_model_inputs(model) as seen, torch.inference_mode():
        model(**inputs)
    if not seen:
        raise ValueError(f"{type(model).__name__}'s forward never called its language model")
    return inputs["input_ids"][0].tolist(), seen[0]


def item_embeddings(recipe: Recipe, path: str, device: str, dtype: str, modality: str,
                    items: list) -> list[Any]:
    """Per item, processed alone in the recipe's prompt, the rows of the language model's
    input at the modality's token: the item's embedding as transformers merges it."""
    from transformers import AutoConfig

    token = embed_token_id(AutoConfig.from_pretrained(path), modality)
    embeddings = []
    for item in items:
        ids, seen = forward_inputs(recipe, path, device, dtype,
                                   recipe.render_prompt(modality, 1), modality, [item])
        embeds = seen.get("inputs_embeds")
        if embeds is None:
            raise ValueError("the HF model's language model got no inputs_embeds")
        rows = [i for i, t in enumerate(ids) if t == token]
        embeddings.append(embeds[0, rows].float())
    return embeddings


def mrope_positions(recipe: Recipe, path: str, device: str, dtype: str, prompt: str,
                    images: list) -> tuple[Any, int]:
    """(positions (axes, tokens), delta) as the HF model's forward computes them."""
    import torch
    from transformers import AutoConfig

    # Qwen-style M-RoPE has three axes; HunYuanVL's xDRoPE has one per `mrope_section` entry
    rope = AutoConfig.from_pretrained(path).get_text_config().rope_parameters or {}
    axes = max(len(rope.get("mrope_section") or ()), 3)
    ids, seen = forward_inputs(recipe, path, device, dtype, prompt, "image", images)
    positions = seen.get("position_ids")
    if positions is None and not images:
        # a text-only prompt: the model hands none, and its language model places every
        # token at its cache position on each of the rows
        positions = torch.arange(len(ids)).expand(axes, 1, -1)
    if positions is None or positions.ndim != 3:
        raise ValueError("the HF model handed its language model no M-RoPE positions")
    if positions.shape[0] == axes + 1:  # text positions first, then the M-RoPE rows
        positions = positions[1:]
    positions = positions[:, 0].to("cpu", copy=True).long()
    return positions, int(positions.max()) + 1 - len(ids)


# Outputs of the HF processor that change the HF model's attention and that vLLM may not
# apply (Gemma3's token_type_ids make an image's tokens attend to each other): where the HF
# model differs from both vLLM implementations, it decodes again without each, so the
# evidence names the input that makes the difference.
ABLATIONS = ("token_type_ids",)


def processed_keys(path: str, prompt: str, modality: str, items: list) -> set[str]:
    return set(hf_inputs(path, prompt, modality, items, "cpu", "float32"))


def decode(recipe: Recipe, path: str, device: str, dtype: str, prompt: str, modality: str,
           items: list, tokens: int = GENERATE_TOKENS, without: tuple[str, ...] = ()) -> Decoded:
    """Greedy decoding by the HF model, with each step's top logprobs of its raw logits
    (`without`: processor outputs left out)."""
    model = eager(generation_model(recipe, path, device, dtype))
    inputs = hf_inputs(path, prompt, modality, items, device, dtype, without)
    prompt_ids, chosen, steps = greedy_steps(model, inputs, tokens)
    return Decoded(tuple(prompt_ids), tuple(chosen), tuple(steps))
