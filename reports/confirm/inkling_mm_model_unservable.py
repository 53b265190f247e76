"""Can vLLM's Transformers backend serve Inkling (inkling_mm_model)? (vLLM and transformers only)

    python inkling_mm_model_unservable.py CHECKPOINT
    python inkling_mm_model_unservable.py --build OUT     (writes the tiny checkpoint)

CHECKPOINT: thinkingmachines/Inkling, or a tiny one with its layout (transformers 5.25.0's
InklingConfig defaults scaled down: 2 text layers, one hybrid_sliding and one hybrid, d_rel 4,
rel_extent 16, sliding window 8, 4 experts; the vision tower keeps patch 40 with 6 layers;
random weights, the relative-bias and short-convolution weights drawn with std 0.5 so that
they weigh; the vision tower's 6 layers let plan_out_scales go without scipy), built by
`--build OUT` under transformers 5.25.0 (a word-level tokenizer of 256 ids holding
InklingProcessor's default token names; all values unchecked against the hub files).

InklingAttention adds a learned relative-position bias (rel_logits_proj, over the q/kv positions
it counts from the HF cache) to the attention scores by passing `position_bias` to the attention
interface, and runs causal short convolutions (k_sconv, v_sconv, and attn_sconv / mlp_sconv per
layer) whose decode state lives in HF's cache. Readings:
1. the HF model (eager attention): greedy continuation of a text-only prompt of 40 ids, and
   the top-5 logprobs of its last position;
2. vLLM's config loader: the config class it gives model_type inkling_mm_model; vLLM's model
   config: the class it resolves, or what creating it raises;
3. an engine (model_impl="transformers", float32): the same prompt: top-5 logprobs of the
   last position and the greedy continuation, against the HF model's; or what starting it
   raises.
Exit 1 when the engine does not serve it as the HF model does (reproduces); 0 when it does.
"""

import os
import sys
import traceback

import torch
import transformers
import vllm
from transformers import InklingForConditionalGeneration

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
def build(out: str) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import (
        InklingConfig,
        InklingFeatureExtractor,
        InklingImageProcessor,
        InklingProcessor,
        PreTrainedTokenizerFast,
    )

    img, aud, ibos, abos = ("<|unused_200054|>", "<|unused_200053|>", "<|content_image|>",
                            "<|content_audio_input|>")
    specials = ["<|endoftext|>", "<|startoftext|>", img, aud, ibos, abos]
    vocab = {t: i for i, t in enumerate(specials + [f"w{i}" for i in range(250)])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<|endoftext|>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<|startoftext|>",
                                  eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                                  unk_token="<|endoftext|>", additional_special_tokens=specials[2:])
    ids = tok.convert_tokens_to_ids
    text = dict(vocab_size=len(vocab), hidden_size=64, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                swa_num_attention_heads=4, swa_num_key_value_heads=2, swa_head_dim=16,
                sliding_window_size=8, d_rel=4, rel_extent=16,
                layer_types=["hybrid_sliding", "hybrid"], mlp_layer_types=["dense", "sparse"],
                intermediate_size=64, moe_intermediate_size=16, n_routed_experts=4,
                num_experts_per_tok=2, n_shared_experts=1, max_position_embeddings=4096,
                bos_token_id=ids("<|startoftext|>"), eos_token_id=ids("<|endoftext|>"),
                pad_token_id=ids("<|endoftext|>"))
    config = InklingConfig(text_config=text, audio_config={},
                           vision_config=dict(hidden_size=32, num_hidden_layers=6,
                                              num_attention_heads=2),
                           image_token_id=ids(img), audio_token_id=ids(aud),
                           image_bos_token_id=ids(ibos), audio_bos_token_id=ids(abos))
    config.architectures = ["InklingForConditionalGeneration"]
    torch.manual_seed(0)
    model = InklingForConditionalGeneration(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "rel_logits_proj" in name or "sconv" in name:
                param.normal_(0, 0.5)
    model.save_pretrained(out)
    processor = InklingProcessor(image_processor=InklingImageProcessor(),
                                 feature_extractor=InklingFeatureExtractor(), tokenizer=tok)
    processor.save_pretrained(out)
    print(f"built {out}")


if sys.argv[1] == "--build":
    build(sys.argv[2])
    sys.exit(0)


path = sys.argv[1]
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")
ids = [(7 * i + 3) % 60 + 10 for i in range(40)]
N = 4


def failure(error: BaseException) -> str:
    message = str(error)
    text = f"{type(error).__name__}: " + (repr(message) if len(message) <= 300 else
                                          f"{message[:200]!r} ... {message[-80:]!r}")
    frames = traceback.extract_tb(error.__traceback__)
    where = f" at {frames[-1].filename.split('site-packages/')[-1]}:{frames[-1].lineno}" \
        if frames else ""
    return text + where


model = InklingForConditionalGeneration.from_pretrained(path, dtype=torch.float32,
                                                        attn_implementation="eager").eval()
with torch.inference_mode():
    x = torch.tensor([ids])
    hf_logprobs = torch.log_softmax(model(input_ids=x).logits[0, -1].float(), -1)
    hf_gen = model.generate(x, max_new_tokens=N, do_sample=False)[0, len(ids):].tolist()
    # the same forward without the relative bias: what an attention that drops it computes
    for layer in model.model.language_model.layers:
        layer.self_attn.rel_logits_proj.proj.data.zero_()
    nobias = torch.log_softmax(model(input_ids=x).logits[0, -1].float(), -1)
hf_top = torch.topk(hf_logprobs, 5)
hf_ranked = [(int(t), round(float(v), 4))
             for v, t in zip(hf_top.values, hf_top.indices, strict=True)]
print(f"1. HF model: {len(ids)} prompt ids; top-5 at the last position {hf_ranked}; greedy "
      f"{hf_gen}")
del model

from vllm.config import ModelConfig  # noqa: E402
from vllm.transformers_utils.config import get_config  # noqa: E402

hf_config = get_config(path, trust_remote_code=False)
print(f"2. vLLM's config loader gives {type(hf_config).__module__}.{type(hf_config).__name__} "
      f"for model_type {hf_config.model_type!r} (transformers' own: InklingConfig)")
same = False
try:
    model_config = ModelConfig(model=path, model_impl="transformers", max_model_len=4096)
    print(f"2. vLLM resolves {model_config.architecture} (its config class: "
          f"{type(model_config.hf_config).__module__}.{type(model_config.hf_config).__name__})")
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    print(f"2. vLLM's model config: {failure(error)}")
    sys.exit(1)
try:
    llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32", max_model_len=4096,
                   enforce_eager=True, kv_cache_memory_bytes=1 << 26,
                   limit_mm_per_prompt={"image": 0, "audio": 0})
    result = llm.generate({"prompt_token_ids": ids},
                          vllm.SamplingParams(temperature=0.0, max_tokens=N, logprobs=5),
                          use_tqdm=False)[0]
    top = {int(t): float(v.logprob) for t, v in result.outputs[0].logprobs[0].items()}
    gap = max(abs(float(hf_logprobs[t]) - v) for t, v in top.items())
    gap_nobias = max(abs(float(nobias[t]) - v) for t, v in top.items())
    gen = list(result.outputs[0].token_ids)
    same = gap < 1e-3 and gen == hf_gen
    ranked = [(t, round(v, 4)) for t, v in sorted(top.items(), key=lambda kv: -kv[1])]
    print(f"3. engine: served; top-5 {ranked}; "
          f"largest difference from the HF model's logprobs {gap:.3e} (from the HF model with "
          f"its relative bias zeroed: {gap_nobias:.3e}); greedy {gen} (HF {hf_gen})")
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    print(f"3. engine: {failure(error)}")
    if os.environ.get("TRACEBACK"):
        traceback.print_exc()
sys.exit(0 if same else 1)
