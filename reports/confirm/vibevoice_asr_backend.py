"""How vLLM's Transformers backend serves VibeVoice ASR (vLLM and transformers only).

    python vibevoice_asr_backend.py CHECKPOINT

VibeVoiceAsrForConditionalGeneration is in vLLM 0.31.0's `_TRANSFORMERS_SUPPORTED_MODELS`:
only the backend serves it. Audio at the feature extractor's own 24 kHz (float32, CPU), the
converted chat template's user turn; four readings:
1. a text-only prompt through the HF processor and through the backend's processor;
2. one audio with the template's <|AUDIO_DURATION|>: the prompt ids of the HF processor and of
   the backend's processor, decoded;
3. the backend's own audio path (`MultiModalMixin._process_audio_input`, run with the HF model
   as its `model`) on two audios of different lengths (1.0 s and 0.6 s, each processed by the
   backend's processor in a prompt of its own), batched the way the model runner batches them
   (`group_and_batch_mm_kwargs`): what each audio's `padding_mask` is when it reaches the HF
   model's get_audio_features, and what that does;
4. whether the input of the acoustic tokenizer's first feed-forward Linear (one the backend
   swaps for a vLLM linear layer) is contiguous in the HF model, then one greedy step through
   the backend with one audio.
Exit 1 when any reading differs from what transformers does (reproduces).
"""

import functools
import os
import sys
import types

import numpy as np
import torch
import transformers
import vllm
from transformers import AutoProcessor, VibeVoiceAsrForConditionalGeneration

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
processor = AutoProcessor.from_pretrained(path)
RATE = processor.feature_extractor.sampling_rate
BOX = "<|box_start|>"  # the audio token, one per 3200 samples once expanded
AUDIO = f"<|object_ref_start|>{BOX}<|object_ref_end|>"
TURN = ("<|im_start|>user\n{audio}\nThis is a <|AUDIO_DURATION|> seconds audio, please "
        "transcribe it.<|im_end|>\n<|im_start|>assistant\n")
PROMPT, TEXT_ONLY = TURN.format(audio=AUDIO), TURN.format(audio="")
rng = np.random.RandomState(0)
audios = [rng.uniform(-0.5, 0.5, int(s * RATE)).astype(np.float32) for s in (1.0, 0.6)]
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}, audio at {RATE} Hz")
reproduced = False

from vllm.config import ModelConfig  # noqa: E402
from vllm.model_executor.models.transformers.multimodal import MultiModalMixin  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402
from vllm.multimodal.utils import group_and_batch_mm_kwargs  # noqa: E402

config = ModelConfig(model=path, model_impl="transformers", max_model_len=4096,
                     dtype="float32", limit_mm_per_prompt={"audio": 1})
mm = MULTIMODAL_REGISTRY.create_processor(config)


def attempt(run):
    try:
        return run()
    except Exception as error:  # noqa: BLE001 - what each side does is the reading
        return f"{type(error).__name__}: {error}"


# 1. a text-only prompt
hf_text = attempt(lambda: processor(text=TEXT_ONLY, return_tensors="pt")["input_ids"].shape)
backend_text = attempt(lambda: len(mm(TEXT_ONLY, mm.info.parse_mm_data({}))["prompt_token_ids"]))
print(f"1. text only: HF processor {hf_text}; backend processor {backend_text}")
reproduced |= isinstance(backend_text, str)

# 2. the duration the processor writes into the text
hf_ids = processor(text=PROMPT, audio=audios[:1], sampling_rate=RATE,
                   return_tensors="pt")["input_ids"][0].tolist()
backend_ids = list(mm(PROMPT, mm.info.parse_mm_data({"audio": [(audios[0], RATE)]}))
                   ["prompt_token_ids"])
shown = [processor.tokenizer.decode(ids).replace(BOX, "")
         for ids in (hf_ids, backend_ids)]
print(f"2. {len(hf_ids)} HF ids vs {len(backend_ids)} backend ids; decoded without the audio "
      f"tokens:\n   HF      {shown[0]!r}\n   backend {shown[1]!r}")
reproduced |= hf_ids != backend_ids

# 3. the backend's audio path on two audios of different lengths
model = VibeVoiceAsrForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
items = [("audio", mm(PROMPT, mm.info.parse_mm_data({"audio": [(a, RATE)]}))["mm_kwargs"]
          ["audio"][0]) for a in audios]
((_, _, batch),) = group_and_batch_mm_kwargs(items, device="cpu")
print(f"3. batched fields: input_values {type(batch['input_values']).__name__}, padding_mask "
      f"{type(batch['padding_mask']).__name__}, num_audio_tokens "
      f"{batch['num_audio_tokens'].tolist()}")
seen = []
get_audio_features = model.model.get_audio_features


def recording(*args, **kwargs):
    seen.append(type(kwargs.get("padding_mask")).__name__)
    return get_audio_features(*args, **kwargs)


model.model.get_audio_features = recording
backend = types.SimpleNamespace(
    model=model.model, check_version=lambda *_: None,
    _split_embeddings=functools.partial(MultiModalMixin._split_embeddings, None),
    _select_item_kwargs=functools.partial(MultiModalMixin._select_item_kwargs, None))
try:
    with torch.inference_mode():
        rows = MultiModalMixin._process_audio_input(backend, **batch)
    print(f"   backend rows per audio {[tuple(r.shape) for r in rows]}")
except AttributeError as error:
    print(f"   get_audio_features got padding_mask as {seen}; the backend raises "
          f"{type(error).__name__}: {error}")
    reproduced = True
model.model.get_audio_features = get_audio_features
hop = model.config.acoustic_tokenizer_encoder_config.hop_length
with torch.inference_mode():
    alone = [get_audio_features(**processor.feature_extractor(
        [a], sampling_rate=RATE, pad_to_multiple_of=hop)).pooler_output for a in audios]
print(f"   the HF model, each audio alone: pooler_output {[tuple(p.shape) for p in alone]}")

# 4. the acoustic tokenizer's feed-forward input, and one step through the backend
contiguous = []
ffn = model.model.acoustic_tokenizer_encoder.stem.stage[0].ffn.linear1
ffn.register_forward_pre_hook(lambda _, args: contiguous.append(args[0].is_contiguous()))
with torch.inference_mode():
    model(**processor(text=PROMPT, audio=audios[:1], sampling_rate=RATE, return_tensors="pt"))
print(f"4. HF model: the acoustic tokenizer's ffn.linear1 input is contiguous: {contiguous[0]}")
llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32", max_model_len=1024,
               limit_mm_per_prompt={"audio": 1}, enforce_eager=True,
               kv_cache_memory_bytes=1 << 26)
try:
    result = llm.generate({"prompt": PROMPT, "multi_modal_data": {"audio": [(audios[0], RATE)]}},
                          vllm.SamplingParams(temperature=0.0, max_tokens=1), use_tqdm=False)
    print(f"   backend generated {result[0].outputs[0].token_ids}")
except RuntimeError as error:
    print(f"   backend: {type(error).__name__}: {str(error).splitlines()[0]}")
    reproduced = True
sys.exit(1 if reproduced else 0)

# Measured 2026-12-03, vLLM 0.31.0 (.venv), CPU, on this project's tiny vibevoice_asr fixture
# built for each version (the real feature extractor and hop of 3200 samples), exit 1 on both:
# transformers 5.17.0:
#   1. text only: HF processor torch.Size([1, 66]); backend processor 66
#   2. 60 HF ids vs 76 backend ids; decoded without the audio tokens:
#      HF      '...<|object_ref_start|><|object_ref_end|>\nThis is a 1.00 seconds audio, ...'
#      backend '...<|object_ref_start|><|object_ref_end|>\nThis is a <|AUDIO_DURATION|> ...'
#   3. batched fields: input_values list, padding_mask list, num_audio_tokens [8, 5]
#      get_audio_features got padding_mask as ['list']; the backend raises AttributeError:
#      'list' object has no attribute 'sum'
#      the HF model, each audio alone: pooler_output [(8, 64), (5, 64)]
#   4. HF model: the acoustic tokenizer's ffn.linear1 input is contiguous: False
#      backend: RuntimeError: Expected a.stride(-1) == 1 to be true, but got false.
# transformers 5.14.1 (Legacy path): as above but for
#   1. text only: HF processor TypeError: VibeVoiceAsrProcessor.__call__() missing 1 required
#      positional argument: 'audio'; backend processor 66
#   2. 60 HF ids vs 60 backend ids (both write '1.00')
