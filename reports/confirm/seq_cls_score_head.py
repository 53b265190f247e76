"""Can vLLM's Transformers backend load a multimodal sequence classifier whose head is named
`score`? (vLLM and transformers only.)

    python seq_cls_score_head.py CHECKPOINT

CHECKPOINT: a Gemma3ForSequenceClassification folder (transformers saves its head as
`score.weight`, as every `*ForSequenceClassification` of a decoder model does). vLLM 0.31.0
resolves the architecture to `TransformersMultiModalForSequenceClassification`
(runner="pooling", model_impl="transformers"), which keeps the head it finds
(`getattr_iter(seq_cls_model, ["classifier", "score"])`) under the name `classifier` and maps
no `score.` weight onto it. Then, with the weight renamed to `classifier.weight` in a copy of
the folder (the cause removed), what the backend's `classify` returns against the HF model's
own probabilities, and native vLLM (`model_impl="vllm"`) for reference.
Exit 1: loading the untouched checkpoint fails on `score` (reproduces). Renamed, the model
loads, and its class head (`ClassifierWithReshape`, which unsqueezes the pooled states for a
head that reads `[:, 0]`) hands a plain `nn.Linear` score a (1, hidden) row per request: the
pooled data is (1, labels), not the 1-D vector `classify` takes.
"""

import os
import shutil
import sys
import tempfile

import numpy as np
import torch
import transformers
import vllm
from PIL import Image
from safetensors.torch import load_file, save_file
from transformers import AutoProcessor, Gemma3ForSequenceClassification

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
PROMPT = ("<start_of_turn>user <start_of_image> Which sentiment does this image show?"
          "<end_of_turn>\n<start_of_turn>model\n")
image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (30, 40, 3), dtype=np.uint8))
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")
keys = sorted(k for k in load_file(os.path.join(path, "model.safetensors")) if "." in k
              and not k.startswith(("vision_tower", "language_model", "multi_modal", "model.")))
print(f"checkpoint head weights: {keys}")

# the HF model first: once vLLM's backend has loaded, transformers' classes need a vLLM config
model = Gemma3ForSequenceClassification.from_pretrained(path, dtype=torch.float32).eval()
inputs = AutoProcessor.from_pretrained(path)(text=PROMPT, images=[image], return_tensors="pt")
with torch.inference_mode():
    hidden = model.model(**inputs).last_hidden_state[0]
    hf_last = torch.softmax(model(**inputs).logits[0], -1).tolist()
    hf_first = torch.softmax(model.score(hidden[0]), -1).tolist()
del model


def served(folder, impl):
    try:
        llm = vllm.LLM(model=folder, runner="pooling", model_impl=impl, dtype="float32",
                       max_model_len=512, limit_mm_per_prompt={"image": 1}, enforce_eager=True,
                       kv_cache_memory_bytes=1 << 26)
    except Exception as error:  # noqa: BLE001 - the error is the measurement
        return f"{type(error).__name__}: {str(error)[:200]}"
    config = llm.llm_engine.vllm_config.model_config
    request = {"prompt": PROMPT, "multi_modal_data": {"image": [image]}}
    try:
        (out,) = llm.classify(request, use_tqdm=False)
        probs = [round(p, 6) for p in out.outputs.probs]
    except ValueError as error:  # what the pooler handed over, read without the check
        (raw,) = llm.encode(request, pooling_task="classify", use_tqdm=False)
        data = raw.outputs.data
        probs = (f"classify: {type(error).__name__}: {error}; the pooled data is "
                 f"{tuple(data.shape)}: {data.tolist()}")
    del llm
    return config.architecture, config.pooler_config.seq_pooling_type, probs


untouched = served(path, "transformers")
print(f"backend, checkpoint as saved: {untouched}")
print(f"native vLLM: {served(path, 'vllm')}")

copy = tempfile.mkdtemp()
shutil.copytree(path, copy, dirs_exist_ok=True)
weights = load_file(os.path.join(copy, "model.safetensors"))
weights["classifier.weight"] = weights.pop("score.weight")
save_file(weights, os.path.join(copy, "model.safetensors"), metadata={"format": "pt"})
renamed = served(copy, "transformers")
shutil.rmtree(copy)
print(f"backend, score renamed to classifier: {renamed}")
print(f"HF model (its own pooling: the last token)  {hf_last}")
print(f"HF head on the first token (vLLM's CLS)    {hf_first}")

sys.exit(1 if isinstance(untouched, str) and "named 'score'" in untouched else 0)

# Measured 2026-12-03, vLLM 0.31.0 (.venv), transformers 5.17.0, CPU, on this project's tiny
# gemma3_seq_cls fixture (exit 1):
#   checkpoint head weights: ['score.weight']
#   backend, checkpoint as saved: ValueError: There is no module or parameter named 'score' in
#     TransformersMultiModalForSequenceClassification. The available parameters belonging to
#     (TransformersMultiModalForSequenceClassification) are: {'model. ...
#   native vLLM: AttributeError: 'Gemma3Config' object has no attribute 'vocab_size'
#   backend, score renamed to classifier: ('TransformersMultiModalForSequenceClassification',
#     'CLS', 'classify: ValueError: pooled_data should be a 1-D probability vector; the pooled
#     data is (1, 3): [[0.4337989389896393, 0.31411242485046387, 0.25208863615989685]]')
#   HF model (its own pooling: the last token)  [0.3972788155078888, 0.3573664128780365,
#     0.2453547716140747]
#   HF head on the first token (vLLM's CLS)    [0.4337989389896393, 0.31411242485046387,
#     0.25208863615989685]
