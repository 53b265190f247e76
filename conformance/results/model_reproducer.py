"""The body of a model check's standalone reproducer (`model`, `generate`): greedy decoding with
top logprobs by vLLM's Transformers backend against the HF model itself and, where vLLM has a
native model, native vLLM, on one prompt; the first difference, and exit 1 while it reproduces.

This module is exported as it is: `standalone.write_model_standalone` embeds its source after
the constants of the failing cell, so it imports only vLLM, transformers and torch (numpy and
Pillow come with them), and everything it needs comes in as arguments. A test runs it.
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


def hf_decode(checkpoint: str, prompt: str, modality: str, items: list,
              tokens: int) -> tuple[list[int], list[int], list[dict[int, float]]]:
    """The HF model of the checkpoint's own class: (prompt ids, greedy tokens, per step the
    top logprobs of its raw logits, the chosen token's included)."""
    import torch
    import transformers
    from transformers import AutoConfig, AutoProcessor

    architecture = AutoConfig.from_pretrained(checkpoint).architectures[0]
    model = getattr(transformers, architecture).from_pretrained(
        checkpoint, dtype=torch.float32).eval()
    inputs = AutoProcessor.from_pretrained(checkpoint)(
        text=prompt, return_tensors="pt", **hf_media(modality, items))
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


def vllm_decode(checkpoint: str, impl: str, prompt: str, modality: str, items: list,
                tokens: int, options: dict[str, str]) -> tuple[list[int], list[int],
                                                               list[dict[int, float]]]:
    """vLLM with `model_impl=impl` ("transformers": the backend; "vllm": native), float32,
    in this process."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    import vllm

    # one sequence and a small KV cache: a tiny or small model runs beside other processes
    llm = vllm.LLM(model=checkpoint, model_impl=impl, dtype="float32", max_model_len=1024,
                   max_num_seqs=1, max_num_batched_tokens=1024,
                   kv_cache_memory_bytes=KV_CACHE_BYTES,
                   limit_mm_per_prompt={modality: max(1, len(items))}, enforce_eager=True,
                   mm_processor_cache_gb=0, seed=0, **options)
    params = vllm.SamplingParams(temperature=0.0, max_tokens=tokens, logprobs=TOP_LOGPROBS)
    (result,) = llm.generate({"prompt": prompt, "multi_modal_data": {modality: items}}, params,
                             use_tqdm=False)
    completion = result.outputs[0]
    steps = [{int(t): float(v.logprob) for t, v in (top or {}).items()}
             for top in completion.logprobs or ()]
    return list(result.prompt_token_ids), list(completion.token_ids), steps


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


def main(checkpoint: str | None, prompt: str, modality: str, items: list, tokens: int,
         native: bool, formats: dict[str, dict[str, str]], atol: float) -> int:
    """Exit status: 1 the backend differs from a reference, 0 it agrees with every one,
    2 no checkpoint or a reference cannot run."""
    if checkpoint is None:
        print("usage: python this_script.py CHECKPOINT (a local folder or a hub id)")
        return 2
    import transformers
    import vllm

    print(f"vllm {vllm.__version__}, transformers {transformers.__version__}; {checkpoint}")
    print(f"prompt {prompt!r} with {len(items)} {modality} item(s); {tokens} greedy token(s)")
    references: dict[str, tuple] = {}
    try:  # the HF model first: loading vLLM's backend decorates transformers' classes
        references["the HF model"] = hf_decode(checkpoint, prompt, modality, items, tokens)
        if native:
            references["native vLLM"] = vllm_decode(checkpoint, "vllm", prompt, modality,
                                                    items, tokens, formats.get("vllm", {}))
    except Exception as error:
        print(f"CANNOT TELL: a reference fails: {type(error).__name__}: {error}")
        return 2
    backend = vllm_decode(checkpoint, "transformers", prompt, modality, items, tokens,
                          formats.get("transformers", {}))
    status = 0
    for name, expected in references.items():
        found = first_difference(expected, backend, (name, "backend"), atol)
        print(f"backend vs {name}: " + (f"FAILS: {found}" if found else "agrees"))
        status = 1 if found else status
    return status
