"""Does vLLM's Transformers backend load an Unlimited-OCR checkpoint's lm_head?

(vLLM and transformers only)

    python unlimited_ocr_unservable.py CHECKPOINT

CHECKPOINT: baidu/Unlimited-OCR, or this project's tiny one (fixtures/recipes/unlimited_ocr.py,
not a registered fixture since the backend cannot serve it), built with
    .venv/bin/python -c "from pathlib import Path; from fixtures.build import write_checkpoint;
    from fixtures.recipes.unlimited_ocr import RECIPE, make;
    write_checkpoint(RECIPE, make('tiny'), Path('/tmp/unlimited_ocr'))"
under `conformance exec --transformers 5.25.0 --` (or 5.22.2; the model type exists from 5.20).

UnlimitedOcrModel, the base model that the backend builds (AutoModel), declares
`_keys_to_ignore_on_load_unexpected = {"lm_head"}` (its comment: "unused and untied weight in
original checkpoint"), while UnlimitedOcrForConditionalGeneration reads its logits from that
untied lm_head (tie_word_embeddings false). The backend turns the base model's ignore patterns
into weight-mapper rules that drop every matching checkpoint key, the causal wrapper's own
lm_head.weight included. Readings:
1. the checkpoint: whether it holds lm_head.weight, tie_word_embeddings, the base model's
   ignore patterns; the HF model (transformers' own loading): its lm_head against the
   checkpoint's, and the top-5 logprobs of the last position of a text-only prompt of ids;
2. the backend's weight mapper: what it makes of the key lm_head.weight;
3. an engine (model_impl="transformers", float32): its lm_head against the checkpoint's
   (NaN count, largest difference, NaN counted as inf) and the same prompt's top-5 logprobs;
   or what starting it raises (vLLM 0.34.0 stops before the backend).
Exit 1 when the engine's lm_head is not the checkpoint's (reproduces); 0 when it is.
"""

import os
import sys

import torch
import transformers
import vllm
from safetensors import safe_open
from transformers import AutoConfig, UnlimitedOcrForConditionalGeneration, UnlimitedOcrModel

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}, model_impl transformers")
ids = [5, 17, 29, 33, 41, 52, 60, 71, 80, 90]

with safe_open(os.path.join(path, "model.safetensors"), "pt") as f:
    keys = set(f.keys())
    ckpt_head = f.get_tensor("lm_head.weight").float() if "lm_head.weight" in keys else None
config = AutoConfig.from_pretrained(path)
present = 'present ' + str(tuple(ckpt_head.shape)) if ckpt_head is not None else 'absent'
ignored = UnlimitedOcrModel._keys_to_ignore_on_load_unexpected
print(f"1. checkpoint: lm_head.weight {present}; "
      f"tie_word_embeddings {config.tie_word_embeddings} (text_config "
      f"{config.text_config.tie_word_embeddings}); "
      f"UnlimitedOcrModel._keys_to_ignore_on_load_unexpected {ignored}")
model = UnlimitedOcrForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
with torch.inference_mode():
    hf = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0, -1].float(), -1)
hf_gap = float((model.lm_head.weight.float() - ckpt_head).abs().max())
top = torch.topk(hf, 5)
print(f"1. HF model: lm_head vs the checkpoint's: largest difference {hf_gap:.3e}; top-5 "
      f"{[(int(t), round(float(v), 4)) for v, t in zip(top.values, top.indices, strict=True)]}")
del model

try:
    llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32", max_model_len=4096,
                   enforce_eager=True, kv_cache_memory_bytes=1 << 26,
                   limit_mm_per_prompt={"image": 0})
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    message = " ".join(str(error).split())
    print(f"2-3. no engine: {type(error).__name__}: {message[:400]}")
    sys.exit(1)


def mapped(model):
    return (type(model).__name__, model.hf_to_vllm_mapper.apply_list(["lm_head.weight"]),
            model.lm_head.weight.detach().float().cpu().clone())


name, new_keys, head = llm.apply_model(mapped)[0]
print(f"2. the backend's weight mapper ({name}): 'lm_head.weight' -> {new_keys}")
rows = min(head.shape[0], ckpt_head.shape[0])
diff = (head[:rows] - ckpt_head[:rows]).abs()
result = llm.generate({"prompt_token_ids": ids},
                      vllm.SamplingParams(temperature=0.0, max_tokens=1, logprobs=5),
                      use_tqdm=False)[0]
got = {int(t): round(float(v.logprob), 4) for t, v in result.outputs[0].logprobs[0].items()}
print(f"3. engine: lm_head {tuple(head.shape)}: {int(torch.isnan(head).sum())} NaN of "
      f"{head.numel()}, largest difference from the checkpoint's "
      f"{float(diff.nan_to_num(float('inf')).max()):.3e}; "
      f"top-5 {got}")
sys.exit(0 if torch.equal(head[:rows], ckpt_head[:rows]) else 1)
