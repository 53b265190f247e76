#!/usr/bin/env python3
"""How vLLM's Transformers backend serves Cosmos3-Omni (vLLM and transformers only).

    .venv/bin/conformance exec --transformers 5.17.0 -- .venv/bin/python \
        reports/confirm/cosmos3_omni_backend.py CHECKPOINT_DIR
    .venv/bin/conformance exec --vllm 0.34.0 --transformers 5.22.2 -- .venv/bin/python \
        reports/confirm/cosmos3_omni_backend.py CHECKPOINT_DIR

Cosmos3OmniForConditionalGeneration (Qwen3-VL's vision tower with DeepStack and Qwen3-VL's text
model under Cosmos3OmniConfig) has no native vLLM model: vLLM serves it through the backend.
Readings, on one checkpoint folder:
1. the config vLLM parses for it (`ModelConfig(model_impl="transformers")`) and the backend's
   own build step, `AutoModel.from_config(config)` on the meta device (base.py);
2. the image budget per item vLLM's scheduler reads from the backend
   (`get_mm_max_toks_per_item`) beside the HF processor's token counts;
3. two image placeholders for one image through the backend's processor: what it raises;
4. where the backend takes video (vLLM >= 0.32, transformers >= 5.18): one video of two 16x16
   frames through the backend's processor, its embedding positions and the ids there, beside
   the HF processor's <|video_pad|> positions;
5. the HF model on one image prompt: get_image_features' outputs (pooler_output, which the
   backend keeps, and deepstack_features, which it drops: `_get_features` returns
   `features.pooler_output`), and the last position's top logprobs of the full HF forward vs
   the same forward with the DeepStack features dropped (what the backend's decoder gets).
"""

import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
import vllm  # noqa: E402
from PIL import Image  # noqa: E402
from vllm.config import ModelConfig  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402

IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"
VIDEO = "<|vision_start|><|video_pad|><|vision_end|>"
PROMPT = f"<|im_start|>user\n{IMAGE}What is in these images?<|im_end|>\n<|im_start|>assistant\n"


def shapes(value):
    if isinstance(value, torch.Tensor):
        return tuple(value.shape)
    return [shapes(v) for v in value]


def short(error: BaseException) -> str:
    message = " ".join(str(error).split())
    return f"{type(error).__name__}: {message[:160]}"


def main(path: str) -> None:
    print("vLLM", vllm.__version__, "transformers", transformers.__version__)
    rng = np.random.default_rng(0)
    image = Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8))

    config = ModelConfig(model=path, model_impl="transformers", max_model_len=4096,
                         limit_mm_per_prompt={"image": 2, "video": 1})
    hf_config = config.hf_config
    print(f"1. vLLM parses the config as {type(hf_config).__module__}."
          f"{type(hf_config).__name__}; architectures {config.architectures}")
    try:
        with torch.device("meta"):  # the backend builds on the meta device
            model = transformers.AutoModel.from_config(config=hf_config)
        print(f"   backend build step AutoModel.from_config: built {type(model).__name__}")
    except Exception as error:  # noqa: BLE001 - the error is the reading
        print(f"   backend build step AutoModel.from_config raised {short(error)}")

    mm = MULTIMODAL_REGISTRY.create_processor(config)
    from vllm.multimodal.encoder_budget import get_mm_max_toks_per_item
    budget = dict(get_mm_max_toks_per_item(mm, {"image": 1}, cache=None))
    hf = transformers.AutoProcessor.from_pretrained(path)
    counts = {f"{h}x{w}": hf._get_num_multimodal_tokens(image_sizes=[[h, w]])["num_image_tokens"][0]
              for h, w in ((10000, 10000), (400, 400), (400, 51), (51, 400))}
    print(f"2. backend image budget per item {budget.get('image')}; HF processor counts {counts}")

    try:
        mm(IMAGE * 2, mm.info.parse_mm_data({"image": [image]}))
        print("3. two placeholders, one image: the backend accepted it")
    except Exception as error:  # noqa: BLE001 - the error is the reading
        message, cause = " ".join(str(error).split()), error.__cause__ or error.__context__
        print(f"3. two placeholders, one image: {type(error).__name__}: starts {message[:45]!r}"
              f" ... ends {message[-40:]!r}; caused by {cause!r}")

    frames = np.random.RandomState(0).randint(0, 256, (2, 16, 16, 3), dtype=np.uint8)
    metadata = {"fps": 2.0, "duration": 1.0, "total_num_frames": 2, "frames_indices": [0, 1],
                "video_backend": "opencv", "do_sample_frames": False}
    try:
        out = mm(f"Watch {VIDEO} now.", mm.info.parse_mm_data({"video": [(frames, metadata)]}))
        ids = list(out["prompt_token_ids"])
        (r,) = out["mm_placeholders"]["video"]
        positions = [r.offset + i for i in (range(r.length) if r.is_embed is None
                                            else r.is_embed.nonzero().flatten().tolist())]
        pad = hf.tokenizer.convert_tokens_to_ids("<|video_pad|>")
        start = hf.tokenizer.convert_tokens_to_ids("<|vision_start|>")
        print(f"4. backend video: range ({r.offset}, {r.length}), embedding positions "
              f"{positions} holding ids {sorted({ids[p] for p in positions})}; <|video_pad|> "
              f"({pad}) at {[i for i, t in enumerate(ids) if t == pad]}, <|vision_start|> "
              f"({start}) at {[i for i, t in enumerate(ids) if t == start]}")
    except Exception as error:  # noqa: BLE001 - the error is the reading
        print(f"4. backend video: {short(error)}")

    # by its class: once vLLM is imported, AutoConfig maps cosmos3_omni to vLLM's Cosmos3Config
    # on vLLM 0.31.0, which no transformers Auto class takes
    model = transformers.Cosmos3OmniForConditionalGeneration.from_pretrained(
        path, dtype=torch.float32).eval()
    inputs = hf(text=PROMPT, images=[image], return_tensors="pt")
    with torch.no_grad():
        features = model.model.get_image_features(
            inputs["pixel_values"], inputs["image_grid_thw"], return_dict=True)
        pooled = features.pooler_output
        pooled = torch.cat(list(pooled)) if not isinstance(pooled, torch.Tensor) else pooled
        deep = features.deepstack_features or []
        print(f"5. HF get_image_features: pooler_output {tuple(pooled.shape)} (the backend's "
              f"embeddings), deepstack_features {len(deep)} x "
              f"{shapes(deep)} (dropped by the backend)")
        full = model(**inputs).logits[0, -1].log_softmax(-1)
        language_model = model.model.language_model
        forward = language_model.forward

        def without_deepstack(*args, **kwargs):
            kwargs["deepstack_visual_embeds"] = None
            kwargs["visual_pos_masks"] = None
            return forward(*args, **kwargs)

        language_model.forward = without_deepstack
        dropped = model(**inputs).logits[0, -1].log_softmax(-1)
        language_model.forward = forward
    top = full.topk(5).indices.tolist()
    print("   last position's top-5 logprobs, full HF forward vs DeepStack dropped:")
    for token in top:
        print(f"     token {token}: hf {full[token]:.6f} vs dropped {dropped[token]:.6f} "
              f"(off by {abs(full[token] - dropped[token]):.2e})")
    print(f"   max abs over the vocabulary {(full - dropped).abs().max():.2e}")


if __name__ == "__main__":
    main(sys.argv[1])
