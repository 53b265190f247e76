"""How many soft tokens native vLLM and transformers give a Gemma 4 Unified audio (vLLM and
transformers only).

    python gemma4_unified_audio_tokens.py CHECKPOINT   # a Gemma4UnifiedForConditionalGeneration

Gemma 4 Unified has no audio tower: Gemma4UnifiedProcessor writes one <|audio|> per 640 raw
samples, ceil(samples / audio_samples_per_token). Native vLLM's Gemma4UnifiedProcessingInfo
inherits Gemma4's (gemma4_mm.py `_compute_audio_num_tokens`: mel framing, then two stride-2
convolutions of the tower the unified model does not have). For audios of several lengths (16
kHz), a prompt holding one audio through native vLLM's processor and through the backend's: the
soft tokens each range holds (is_embed), beside the HF processor's own count and expansion.
Exit 1 where native's count differs from transformers' (reproduces).
"""

import os
import sys

import numpy as np
import transformers
import vllm
from vllm.config import ModelConfig
from vllm.multimodal import MULTIMODAL_REGISTRY

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
processor = transformers.AutoProcessor.from_pretrained(path)
token = processor.audio_token
token_id = processor.tokenizer.convert_tokens_to_ids(token)
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}; "
      f"audio_samples_per_token "
      f"{getattr(processor.feature_extractor, 'audio_samples_per_token', None)}")
processors = {}
for impl in ("vllm", "transformers"):
    config = ModelConfig(model=path, model_impl=impl, max_model_len=4096,
                         limit_mm_per_prompt={"audio": 1, "image": 1})
    processors[impl] = MULTIMODAL_REGISTRY.create_processor(config)
reproduced = False
for samples in (640, 1600, 1921, 4000, 16000, 16001, 24321):
    audio = np.random.default_rng(samples).standard_normal(samples).astype(np.float32) * 0.1
    hf = processor(text=token, audio=[audio], return_tensors=None)
    expanded = hf["input_ids"][0].count(token_id)
    counted = list(processor._get_num_multimodal_tokens(audio_lengths=[samples])[
        "num_audio_tokens"]) \
        if "audio_lengths" in processor._get_num_multimodal_tokens.__code__.co_varnames \
        else None
    seen = {}
    for impl, mm in processors.items():
        out = mm(token, mm.info.parse_mm_data({"audio": [(audio, 16000)]}))
        place = out["mm_placeholders"]["audio"][0]
        seen[impl] = place.get_num_embeds()
    print(f"{samples} samples: HF processor expands {expanded} {token} (counts {counted}); "
          f"native vLLM's range embeds {seen['vllm']}, the backend's {seen['transformers']}")
    reproduced |= seen["vllm"] != expanded
sys.exit(1 if reproduced else 0)
