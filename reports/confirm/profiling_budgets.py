#!/usr/bin/env python3
"""Confirms the profiling findings with vLLM and transformers only (no project code).

For each checkpoint folder given: the encoder budget per item vLLM's scheduler reads
(`vllm.multimodal.encoder_budget.get_mm_max_toks_per_item`) for native vLLM and for the
Transformers backend, and the HF processor's own token count for the largest items a request
may carry (a 10000x10000 image, 400x400, 400x51, 51x400; for audio, the longest audio the
processor keeps: its `max_audio_len` seconds where it declares one, else 30 s).

    .venv/bin/python reports/confirm/profiling_budgets.py CHECKPOINT_DIR...
"""

import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def budgets(path: str, impl: str) -> dict:
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.multimodal.encoder_budget import get_mm_max_toks_per_item

    config = ModelConfig(model=path, model_impl=impl, max_model_len=4096,
                         limit_mm_per_prompt={"image": 1, "audio": 1})
    processor = MULTIMODAL_REGISTRY.create_processor(config)
    counts = {m: 1 for m in processor.info.get_supported_mm_limits()}
    return dict(get_mm_max_toks_per_item(processor, counts, cache=None))


def hf_counts(path: str) -> dict:
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(path)
    out = {}
    if hasattr(processor, "image_processor"):
        for h, w in ((10000, 10000), (400, 400), (400, 51), (51, 400)):
            counts = processor._get_num_multimodal_tokens(image_sizes=[[h, w]])
            out[f"image {h}x{w}"] = counts["num_image_tokens"][0]
    token = getattr(processor, "audio_token", None)
    if token is not None and hasattr(processor, "feature_extractor"):
        import numpy as np

        seconds = getattr(processor, "max_audio_len", 30)
        rate = processor.feature_extractor.sampling_rate
        audio = np.zeros(int(seconds * rate), dtype=np.float32)
        ids = processor(text=token, audio=[audio], return_tensors="pt")["input_ids"][0].tolist()
        out[f"audio {seconds} s"] = ids.count(processor.tokenizer.convert_tokens_to_ids(token))
    return out


if __name__ == "__main__":
    for path in sys.argv[1:]:
        name = os.path.basename(path.rstrip("/"))
        for impl in ("vllm", "transformers"):
            try:
                print(name, impl, budgets(path, impl), flush=True)
            except Exception as error:  # noqa: BLE001 - reported, the next one runs
                print(name, impl, "error:", type(error).__name__, str(error)[:120])
        try:
            print(name, "hf counts", hf_counts(path))
        except Exception as error:  # noqa: BLE001
            print(name, "hf counts error:", type(error).__name__, str(error)[:120])
