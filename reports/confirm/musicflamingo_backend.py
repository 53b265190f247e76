#!/usr/bin/env python3
"""How vLLM's Transformers backend serves Music Flamingo (vLLM and transformers only).

    .venv/bin/python reports/confirm/musicflamingo_backend.py CHECKPOINT_DIR
    .venv/bin/conformance exec --transformers 5.14.1 -- .venv/bin/python \
        reports/confirm/musicflamingo_backend.py CHECKPOINT_DIR

MusicFlamingoForConditionalGeneration has no native vLLM model: vLLM falls back to the backend.
One prompt with one audio (1 s of noise at 16 kHz), three readings:
1. the HF processor's prompt: where its <sound> tokens lie (the audio's embedding positions),
   beside <|sound_bos|> and <|sound_eos|>;
2. the backend's processor (`model_impl="transformers"`): its placeholder range for the audio
   and which of its positions it marks as embeddings (`is_embed`; None: every position);
3. the backend's encoder step as its `_process_audio_input` makes it: the processed audio's
   fields, given to the HF model's get_audio_features the way the backend calls it
   (`get_audio_features(input_features, return_dict=True, **the other fields)`);
4. two <sound> placeholders for one audio through the backend's processor: what it raises.
"""

import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
import vllm  # noqa: E402
from vllm.config import ModelConfig  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402

PROMPT = "<|im_start|>user\n<sound>Describe this music.<|im_end|>\n<|im_start|>assistant\n"


def main(path: str) -> None:
    print("vLLM", vllm.__version__, "transformers", transformers.__version__)
    audio = np.random.default_rng(0).uniform(-1, 1, 16000).astype(np.float32)
    hf = transformers.AutoProcessor.from_pretrained(path)
    ids = hf(text=PROMPT, audio=[audio], return_tensors="pt")["input_ids"][0].tolist()
    sound = [i for i, t in enumerate(ids) if t == hf.audio_token_id]
    bos, eos = ids.index(hf.audio_bos_token_id), ids.index(hf.audio_eos_token_id)
    print(f"1. HF processor: <|sound_bos|> at {bos}, {len(sound)} <sound> at {sound[0]}.."
          f"{sound[-1]}, <|sound_eos|> at {eos}")

    config = ModelConfig(model=path, model_impl="transformers", max_model_len=4096,
                         limit_mm_per_prompt={"audio": 1})
    mm = MULTIMODAL_REGISTRY.create_processor(config)
    out = mm(PROMPT, mm.info.parse_mm_data({"audio": [audio]}))
    place = out["mm_placeholders"]["audio"][0]
    embeds = "None (every position)" if place.is_embed is None else \
        f"{int(place.is_embed.sum())} of {place.length}"
    print(f"2. backend processor: range offset={place.offset} length={place.length}, "
          f"is_embed {embeds}; its prompt ids there "
          f"{sorted(set(out['prompt_token_ids'][place.offset:place.offset + place.length]))}")

    item = out["mm_kwargs"]["audio"][0]
    fields = {k: v.data for k, v in item.items()}
    print("3. the processed audio's fields:",
          {k: tuple(v.shape) if hasattr(v, "shape") else v for k, v in fields.items()})
    model = transformers.MusicFlamingoForConditionalGeneration.from_pretrained(path)
    # the backend pops num_audio_tokens (its split sizes) and passes the rest on, batched (one
    # window: a leading dimension of 1)
    features = fields.pop("input_features").unsqueeze(0)
    fields.pop("num_audio_tokens", None)
    rest = {k: v.unsqueeze(0) for k, v in fields.items() if isinstance(v, torch.Tensor)}
    try:
        got = model.get_audio_features(features, return_dict=True, **rest)
        print("   get_audio_features returned pooler_output", tuple(got.pooler_output.shape))
    except Exception as error:  # noqa: BLE001 - the error is the reading
        print(f"   get_audio_features raised {type(error).__name__}: {error}")

    try:
        mm("<sound><sound>", mm.info.parse_mm_data({"audio": [audio]}))
        print("4. two placeholders, one audio: the backend accepted it")
    except Exception as error:  # noqa: BLE001 - the error is the reading
        message, cause = " ".join(str(error).split()), error.__cause__ or error.__context__
        print(f"4. two placeholders, one audio: {type(error).__name__}: starts {message[:45]!r}"
              f" ... ends {message[-40:]!r}; caused by {cause!r}")


if __name__ == "__main__":
    main(sys.argv[1])
