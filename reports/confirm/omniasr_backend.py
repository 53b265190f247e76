#!/usr/bin/env python3
"""Why vLLM's Transformers backend starts no engine for OmniASR (vLLM and transformers only).

    .venv/bin/conformance exec --transformers 5.25.0 -- .venv/bin/python \
        reports/confirm/omniasr_backend.py CHECKPOINT_DIR

OmniASRForConditionalGeneration has no native vLLM model: vLLM falls back to the backend. Before
an engine starts, vLLM sizes the encoder budget per item (`get_mm_max_toks_per_item`, the
profiling run's); the backend answers for audio from the audio config's input length, read as
max_source_positions, max_position_embeddings or max_pos_emb. Two readings:
1. which of those names OmniASRAudioConfig has, and the audio length the processor caps at;
2. the budget vLLM asks the backend for: its value, or what it raises.
"""

import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import transformers  # noqa: E402
import vllm  # noqa: E402
from vllm.config import ModelConfig  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402
from vllm.multimodal.encoder_budget import get_mm_max_toks_per_item  # noqa: E402

NAMES = ("max_source_positions", "max_position_embeddings", "max_pos_emb")


def main(path: str) -> None:
    print("vLLM", vllm.__version__, "transformers", transformers.__version__)
    config = transformers.AutoConfig.from_pretrained(path)
    audio = config.audio_config
    print(f"1. {type(audio).__name__}: " + ", ".join(
        f"{n} {getattr(audio, n, '(absent)')}" for n in NAMES))
    model_config = ModelConfig(model=path, model_impl="transformers", max_model_len=4096,
                               limit_mm_per_prompt={"audio": 1})
    processor = MULTIMODAL_REGISTRY.create_processor(model_config)
    try:
        budget = dict(get_mm_max_toks_per_item(processor, {"audio": 1}, cache=None))
        print("2. the backend's audio budget:", budget)
    except Exception as error:  # noqa: BLE001 - the error is the reading
        print(f"2. the backend's audio budget raised {type(error).__name__}: {error}")


if __name__ == "__main__":
    main(sys.argv[1])
