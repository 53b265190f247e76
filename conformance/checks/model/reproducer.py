"""The body of a model check's standalone reproducer: vLLM's Transformers backend against the
HF model itself and, where vLLM has a native model, native vLLM, on one prompt; the first
difference, and exit 1 while it reproduces. `model` / `generate`: greedy decoding with top
logprobs; `encoder`: per item, the embeddings the serving engine's `embed_multimodal` returns
against the rows the HF model merges for that item alone; `mrope`: the positions and delta the
engine's `get_mrope_input_positions` returns against those the HF model's forward hands its
language model. The engine's values are recorded while it serves the prompt (both methods
wrapped on the model instance), so the script sees what serving computes.

This module is exported as it is: `results.standalone.model_script` embeds its source after
the constants of the failing cell, so it imports only vLLM, transformers and torch (numpy and
Pillow come with them), and everything it needs comes in as arguments. A test runs it. The
harness's own HF reference decodes with `greedy_steps` too: one decoding loop, in the check
and in the script a user attaches upstream.
"""

from __future__ import annotations

import os
from typing import Any

TOP_LOGPROBS = 5
KV_CACHE_BYTES = 256 * 1024 * 1024


def hf_media(modality: str, items: list) -> dict[str, Any]:
    """The items as the HF processor takes them (vLLM's audio carries its sampling rate)."""
    if modality == "audio":
        return {"audio": [wave for wave, _ in items]}
    return {"images": items} if modality == "image" else {"videos": items}


HF_MODELS: dict[str, Any] = {}


def hf_model(checkpoint: str) -> tuple[Any, Any]:
    """(the HF model of the checkpoint's own class in float32, its processor), loaded once."""
    if checkpoint not in HF_MODELS:
        import torch
        import transformers
        from transformers import AutoConfig, AutoProcessor

        architecture = AutoConfig.from_pretrained(checkpoint).architectures[0]
        model = getattr(transformers, architecture).from_pretrained(
            checkpoint, dtype=torch.float32).eval()
        HF_MODELS[checkpoint] = model, AutoProcessor.from_pretrained(checkpoint)
    return HF_MODELS[checkpoint]


def hf_decode(checkpoint: str, prompt: str, modality: str, items: list,
              tokens: int) -> tuple[list[int], list[int], list[dict[int, float]]]:
    """The HF model's (prompt ids, greedy tokens, per step the top logprobs of its raw logits,
    the chosen token's included)."""
    model, processor = hf_model(checkpoint)
    inputs = processor(text=prompt, return_tensors="pt", **hf_media(modality, items))
    return greedy_steps(model, inputs, tokens)


def hf_language_model_inputs(checkpoint: str, prompt: str, modality: str,
                             items: list) -> tuple[list[int], dict[str, Any]]:
    """The prompt ids and what one HF forward pass hands the language model (its `forward`
    wrapped on the instance)."""
    import torch

    model, processor = hf_model(checkpoint)
    inputs = processor(text=prompt, return_tensors="pt", **hf_media(modality, items))
    decoder, seen = model.get_decoder(), []
    forward = decoder.forward

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return forward(*args, **kwargs)

    decoder.forward = recording
    try:
        with torch.inference_mode():
            model(**inputs)
    finally:
        del decoder.forward
    return inputs["input_ids"][0].tolist(), seen[0]


def hf_item_embeddings(checkpoint: str, prompt_of_one: str, modality: str, items: list,
                       token: int) -> list[Any]:
    """Per item, processed alone: the language model's input rows at the modality's token."""
    embeddings = []
    for item in items:
        ids, seen = hf_language_model_inputs(checkpoint, prompt_of_one, modality, [item])
        rows = [i for i, t in enumerate(ids) if t == token]
        embeddings.append(seen["inputs_embeds"][0, rows].float())
    return embeddings


def hf_mrope(checkpoint: str, prompt: str, modality: str, items: list) -> tuple[Any, int]:
    """(positions (3, tokens), decode delta) as the HF model's forward computes them."""
    import torch

    ids, seen = hf_language_model_inputs(checkpoint, prompt, modality, items)
    positions = seen.get("position_ids")
    if positions is None and not items:  # text only: each row at the cache position
        positions = torch.arange(len(ids)).expand(3, 1, -1)
    if positions.shape[0] == 4:  # text positions first, then the three M-RoPE rows
        positions = positions[1:]
    positions = positions[:, 0].long()
    return positions, int(positions.max()) + 1 - len(ids)


def greedy_steps(model: Any, inputs: Any, tokens: int) -> tuple[list[int], list[int],
                                                                  list[dict[int, float]]]:
    """`generate` greedily: (prompt ids, chosen tokens, per step the top logprobs of the raw
    logits with the chosen token's included; processors that warp logits are bypassed)."""
    import torch

    eos = model.generation_config.eos_token_id
    with torch.inference_mode():
        out = model.generate(**inputs, max_new_tokens=tokens, do_sample=False,
                             output_logits=True, return_dict_in_generate=True,
                             pad_token_id=eos if isinstance(eos, int) else (eos or [0])[0])
    prompt_ids = inputs["input_ids"][0].tolist()
    chosen = out.sequences[0, len(prompt_ids):].tolist()
    steps = []
    for step, logits in enumerate(out.logits[:len(chosen)]):
        logprobs = torch.log_softmax(logits[0].float(), dim=-1)
        top = logprobs.topk(TOP_LOGPROBS)
        row = {int(t): float(v) for t, v in zip(top.indices, top.values, strict=True)}
        row.setdefault(chosen[step], float(logprobs[chosen[step]]))
        steps.append(row)
    return prompt_ids, chosen, steps


def vllm_serve(checkpoint: str, impl: str, prompt: str, modality: str, items: list,
               tokens: int, options: dict[str, str]) -> dict[str, Any]:
    """vLLM with `model_impl=impl` ("transformers": the backend; "vllm": native), float32, in
    this process: "decoded" (prompt ids, tokens, per step the top logprobs), "embeddings" (what
    each `embed_multimodal` call returned, item by item) and "mrope" (what
    `get_mrope_input_positions` returned) while it served the prompt."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    import vllm

    # one sequence and a small KV cache: a tiny or small model runs beside other processes
    llm = vllm.LLM(model=checkpoint, model_impl=impl, dtype="float32", max_model_len=1024,
                   max_num_seqs=1, max_num_batched_tokens=1024,
                   kv_cache_memory_bytes=KV_CACHE_BYTES,
                   limit_mm_per_prompt={modality: max(1, len(items))}, enforce_eager=True,
                   mm_processor_cache_gb=0, seed=0, **options)
    (model,) = llm.apply_model(lambda m: m)  # in process: the model object itself
    seen: dict[str, Any] = {"embeddings": []}

    def record(name: str, keep: Any) -> None:
        method = getattr(model, name, None)
        if method is None:
            return

        def recording(*args: Any, **kwargs: Any) -> Any:
            out = method(*args, **kwargs)
            keep(out)
            return out

        setattr(model, name, recording)

    record("embed_multimodal", lambda out: seen["embeddings"].extend(
        e.detach().float().cpu().clone() for e in out))
    record("get_mrope_input_positions", lambda out: seen.setdefault("mrope", out))
    params = vllm.SamplingParams(temperature=0.0, max_tokens=tokens, logprobs=TOP_LOGPROBS)
    (result,) = llm.generate({"prompt": prompt, "multi_modal_data": {modality: items}}, params,
                             use_tqdm=False)
    completion = result.outputs[0]
    steps = [{int(t): float(v.logprob) for t, v in (top or {}).items()}
             for top in completion.logprobs or ()]
    seen["decoded"] = (list(result.prompt_token_ids), list(completion.token_ids), steps)
    return seen


def first_difference(expected: tuple, actual: tuple, names: tuple[str, str],
                     atol: float) -> str | None:
    """The same prompt ids, tokens and top tokens, each shared logprob within `atol`."""
    (ids_a, tokens_a, steps_a), (ids_b, tokens_b, steps_b) = expected, actual
    a, b = names
    if ids_a != ids_b:
        return f"prompt ids differ: {a} {len(ids_a)} tokens, {b} {len(ids_b)}"
    if len(tokens_a) != len(tokens_b):
        return f"{a} decoded {len(tokens_a)} tokens, {b} {len(tokens_b)}"
    for step, (x, y) in enumerate(zip(tokens_a, tokens_b, strict=True)):
        mine, theirs = steps_a[step], steps_b[step]
        if x != y:
            return f"step {step}: {a} token {x} vs {b} token {y}"
        for token in sorted(set(mine) & set(theirs)):
            if abs(mine[token] - theirs[token]) > atol:
                return (f"step {step}: logprob of token {token} {a} {mine[token]:.6f} vs {b} "
                        f"{theirs[token]:.6f} (off by {abs(mine[token] - theirs[token]):.2e})")
        if set(mine) != set(theirs):
            return f"step {step}: top tokens {a} {sorted(mine)} vs {b} {sorted(theirs)}"
    return None


def embeddings_difference(expected: list, actual: list, names: tuple[str, str], atol: float,
                          rtol: float) -> str | None:
    """The same number of items, each of the same shape and allclose."""
    import torch

    a, b = names
    if len(expected) != len(actual):
        return f"{a} has {len(expected)} item embeddings, {b} {len(actual)}"
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        if tuple(want.shape) != tuple(got.shape):
            return f"item {index}: shape {b} {tuple(got.shape)} vs {a} {tuple(want.shape)}"
        if not torch.allclose(got.double(), want.double(), atol=atol, rtol=rtol):
            return (f"item {index}: max abs difference {float((got - want).abs().max()):.3g} "
                    f"(allowed atol {atol:g} / rtol {rtol:g})")
    return None


def mrope_difference(expected: tuple, actual: tuple, names: tuple[str, str]) -> str | None:
    """The same positions (3 rows per token), then the same decode delta."""
    (want, want_delta), (got, got_delta) = expected, actual
    a, b = names
    if tuple(want.shape) != tuple(got.shape):
        return f"positions shape {b} {tuple(got.shape)} vs {a} {tuple(want.shape)}"
    wrong = (want != got).any(dim=0).nonzero().flatten().tolist()
    if wrong:
        return (f"{len(wrong)} position(s) differ, first at token {wrong[0]}: {b} "
                f"{got[:, wrong[0]].tolist()} vs {a} {want[:, wrong[0]].tolist()}")
    if int(want_delta) != int(got_delta):
        return f"delta {b} {int(got_delta)} vs {a} {int(want_delta)}"
    return None


def main(checkpoint: str | None, check: str, prompt: str, modality: str, items: list,
         native: bool, formats: dict[str, dict[str, str]], tokens: int = 1,
         atol: float = 1e-5, rtol: float = 0.0, prompt_of_one: str = "",
         token: int = -1) -> int:
    """Exit status: 1 the backend differs from a reference, 0 it agrees with every one,
    2 no checkpoint or a reference cannot run. `check`: "model" / "generate" (greedy tokens
    and logprobs within `atol`), "encoder" (per-item embeddings within `atol` / `rtol`; the
    HF side each item alone in `prompt_of_one`, rows at `token`), "mrope"."""
    if checkpoint is None:
        print("usage: python this_script.py CHECKPOINT (a local folder or a hub id)")
        return 2
    import transformers
    import vllm

    print(f"vllm {vllm.__version__}, transformers {transformers.__version__}; {checkpoint}")
    print(f"{check}: prompt {prompt!r} with {len(items)} {modality} item(s)")

    def hf_reference() -> Any:
        if check == "encoder":
            return hf_item_embeddings(checkpoint, prompt_of_one, modality, items, token)
        if check == "mrope":
            return hf_mrope(checkpoint, prompt, modality, items)
        return hf_decode(checkpoint, prompt, modality, items, tokens)

    def served(impl: str) -> Any:
        seen = vllm_serve(checkpoint, impl, prompt, modality, items, tokens,
                          formats.get(impl, {}))
        if check == "mrope" and "mrope" not in seen:
            raise ValueError(f"model_impl={impl!r} computed no M-RoPE positions")
        return seen[{"encoder": "embeddings", "mrope": "mrope"}.get(check, "decoded")]

    references: dict[str, Any] = {}
    try:  # the HF model first: loading vLLM's backend decorates transformers' classes
        references["the HF model"] = hf_reference()
        if native:
            references["native vLLM"] = served("vllm")
    except Exception as error:
        print(f"CANNOT TELL: a reference fails: {type(error).__name__}: {error}")
        return 2
    backend = served("transformers")
    status = 0
    for name, expected in references.items():
        names = (name, "backend")
        if check == "encoder":
            found = embeddings_difference(expected, backend, names, atol, rtol)
        elif check == "mrope":
            found = mrope_difference(expected, backend, names)
        else:
            found = first_difference(expected, backend, names, atol)
        print(f"backend vs {name}: " + (f"FAILS: {found}" if found else "agrees"))
        status = 1 if found else status
    return status
