#!/usr/bin/env python3
"""Confirms the budget-per-option-form findings with vLLM and transformers only.

For one checkpoint folder and one processor option set: the encoder budget per item vLLM's
scheduler reads (`vllm.multimodal.encoder_budget.get_mm_max_toks_per_item`) for native vLLM
(model_impl='vllm') and the Transformers backend (model_impl='transformers'), with the options
given model-level flat (`mm_processor_kwargs=opts`) and scoped (`{"images_kwargs": opts}`),
beside the HF processor's own embeddings for 400x400 and 400x51 images given the options as
vLLM hands them over (flat: to the processor's construction and to its call, as
`get_hf_processor(**kwargs)` and the call do; scoped: to the call): the count of the token that
receives an embedding in its expanded prompt (the processor's image token, or TOKEN). Each form
is measured in a process of its own: processors write options their count helper is given into
their class defaults.

    .venv/bin/python reports/confirm/budget_option_forms.py CHECKPOINT_DIR '<image>' \
        '{"max_pixels": 784}' [TOKEN]
"""

import json
import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def budget(path: str, impl: str, options: dict) -> object:
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.multimodal.encoder_budget import get_mm_max_toks_per_item

    try:
        config = ModelConfig(model=path, model_impl=impl, max_model_len=4096,
                             limit_mm_per_prompt={"image": 1}, mm_processor_kwargs=options)
        processor = MULTIMODAL_REGISTRY.create_processor(config)
        return get_mm_max_toks_per_item(processor, {"image": 1}, cache=None).get("image")
    except Exception as error:  # noqa: BLE001 - reported, the next one runs
        return f"raises {type(error).__name__}: {str(error)[:160]}"


def hf_embeddings(path: str, placeholder: str, options: dict, counted: str | None) -> dict:
    import numpy as np
    from PIL import Image
    from transformers import AutoProcessor

    out = {}
    for h, w in ((400, 400), (400, 51)):
        flat = {k: v for k, v in options.items() if not k.endswith("_kwargs")}
        processor = AutoProcessor.from_pretrained(path, **flat)
        image = Image.fromarray(np.full((h, w, 3), 127, dtype=np.uint8))
        try:
            ids = processor(text=placeholder, images=[image], **options)["input_ids"]
            token = processor.tokenizer.convert_tokens_to_ids(counted or processor.image_token)
            out[f"{h}x{w}"] = list(np.asarray(ids).reshape(-1)).count(token)
        except Exception as error:  # noqa: BLE001
            out[f"{h}x{w}"] = f"raises {type(error).__name__}: {str(error)[:120]}"
    return out


def one(path: str, placeholder: str, given: dict, counted: str | None) -> str:
    hf = hf_embeddings(path, placeholder, given, counted)  # before vLLM's count helpers ran
    return (f"budget: native {budget(path, 'vllm', given)}, backend "
            f"{budget(path, 'transformers', given)}; the HF processor's embeddings: {hf}")


if __name__ == "__main__":
    import subprocess

    if sys.argv[1] == "--one":  # one form, in this process alone
        path, placeholder, given = sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
        print(one(path, placeholder, given, sys.argv[5] if len(sys.argv) > 5 else None))
        sys.exit(0)
    import transformers
    import vllm

    path, placeholder, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    counted = sys.argv[4:5]
    name = os.path.basename(path.rstrip("/")).split("-")[0]
    print(f"{name} {options}: vLLM {vllm.__version__}, transformers {transformers.__version__}")
    for form, given in (("none", {}), ("flat", options), ("scoped", {"images_kwargs": options})):
        got = subprocess.run([sys.executable, __file__, "--one", path, placeholder,
                              json.dumps(given), *counted], capture_output=True, text=True)
        lines = got.stdout.strip().splitlines() or [f"exit {got.returncode}: "
                                                    f"{got.stderr.strip()[-300:]}"]
        print(f"  {form:6} {lines[-1]}", flush=True)
