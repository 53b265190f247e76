#!/usr/bin/env python3
"""How vLLM's Transformers backend serves Granite Speech (and Granite Speech Plus, which takes
the same GraniteSpeechProcessor), beside native vLLM (vLLM and transformers only).

    .venv/bin/python reports/confirm/granite_speech_backend.py CHECKPOINT_DIR
    .venv/bin/conformance exec --transformers 5.14.1 -- .venv/bin/python \
        reports/confirm/granite_speech_backend.py CHECKPOINT_DIR

Five readings, each for native vLLM (model_impl="vllm") and the backend ("transformers"):
1. the items per prompt each allows (`get_supported_mm_limits`), then one prompt with two
   audio placeholders and two audios (1 s and 2 s of noise): its placeholders, or the error;
2. the encoder budget per audio vLLM's scheduler reads (`get_mm_max_toks_per_item`), beside
   the audio config's max_pos_emb (what the backend reads) and GraniteSpeechProcessor's own
   count for a 30 s and a 60 s audio;
3. the dummy audio vLLM profiles with (`get_dummy_mm_inputs({"audio": 1})`): its embeddings;
4. two audio placeholders for one audio: what each side raises;
5. the HF processor alone: its audio_token_id, and how many positions its mm_token_type_ids
   mark as audio (3) for one 1 s audio.
"""

import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import numpy as np  # noqa: E402
import transformers  # noqa: E402
import vllm  # noqa: E402
from vllm.config import ModelConfig  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402
from vllm.multimodal.encoder_budget import get_mm_max_toks_per_item  # noqa: E402

IMPLS = ("vllm", "transformers")
RATE = 16000


def processor(path: str, impl: str, limit: int):
    config = ModelConfig(model=path, model_impl=impl, max_model_len=None,
                         limit_mm_per_prompt={"audio": limit})
    return MULTIMODAL_REGISTRY.create_processor(config)


def noise(seconds: float, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, int(seconds * RATE)).astype(np.float32)


def short(error: BaseException) -> str:
    message = " ".join(str(error).split())
    causes = []
    cause = error.__cause__ or error.__context__
    while cause is not None:
        causes.append(f"{type(cause).__name__}: {' '.join(str(cause).split())[:160]!r}")
        cause = cause.__cause__ or cause.__context__
    return (f"{type(error).__name__}: starts {message[:70]!r} ... ends {message[-90:]!r}; "
            f"caused by {causes or 'nothing'}")


def main(path: str) -> None:
    hf = transformers.AutoProcessor.from_pretrained(path)
    token = hf.audio_token
    print("vLLM", vllm.__version__, "transformers", transformers.__version__,
          type(hf).__name__, "audio token", repr(token))

    print("1. two audios in one prompt")
    prompt = token + token
    for impl in IMPLS:
        mm = processor(path, impl, 2)
        limits = mm.info.get_supported_mm_limits()
        try:
            out = mm(prompt, mm.info.parse_mm_data({"audio": [noise(1, 0), noise(2, 1)]}))
            placed = [int(r.get_num_embeds()) for r in out["mm_placeholders"]["audio"]]
            print(f"  {impl}: supported limits {limits}; placeholders {placed}")
        except Exception as error:  # noqa: BLE001 - the error is the reading
            print(f"  {impl}: supported limits {limits}; raised {short(error)}")

    print("2. encoder budget per audio")
    config = transformers.AutoConfig.from_pretrained(path)
    print(f"  encoder_config.max_pos_emb {config.encoder_config.max_pos_emb} "
          f"(context_size {config.encoder_config.context_size})")
    token_id = hf.tokenizer.convert_tokens_to_ids(token)
    for seconds in (30, 60):
        ids = hf(text=token, audio=[noise(seconds, 2)], return_tensors="pt")["input_ids"][0]
        print(f"  {type(hf).__name__}: a {seconds} s audio gives "
              f"{ids.tolist().count(token_id)} tokens")
    for impl in IMPLS:
        mm = processor(path, impl, 1)
        print(f"  {impl}: budget {dict(get_mm_max_toks_per_item(mm, {'audio': 1}, cache=None))}")

    print("3. the dummy audio vLLM profiles with")
    for impl in IMPLS:
        mm = processor(path, impl, 1)
        config = mm.info.ctx.model_config
        built = mm.get_dummy_inputs(config.max_model_len, {"audio": 1},
                                    config.get_multimodal_config().limit_per_prompt)
        samples = built.mm_data_items["audio"].get_audio_length(0)
        placed = mm.get_dummy_mm_inputs({"audio": 1})["mm_placeholders"]["audio"]
        print(f"  {impl}: dummy audio {samples} samples, "
              f"{sum(int(r.get_num_embeds()) for r in placed)} embeddings")

    print("4. two audio placeholders for one audio")
    for impl in IMPLS:
        mm = processor(path, impl, 2)
        try:
            out = mm(prompt, mm.info.parse_mm_data({"audio": [noise(1, 0)]}))
            placed = [int(r.get_num_embeds()) for r in out["mm_placeholders"]["audio"]]
            print(f"  {impl}: accepted, placeholders {placed}")
        except Exception as error:  # noqa: BLE001 - the error is the reading
            print(f"  {impl}: raised {short(error)}")

    print("5. the HF processor's mm_token_type_ids")
    out = hf(text=token, audio=[noise(1, 0)], return_tensors="pt", return_mm_token_type_ids=True)
    ids = out["input_ids"][0].tolist()
    marks = out["mm_token_type_ids"][0].tolist() if "mm_token_type_ids" in out else None
    print(f"  audio_token_id {getattr(hf, 'audio_token_id', None)!r}; the prompt holds "
          f"{ids.count(token_id)} {token} (id {token_id}); mm_token_type_ids mark "
          f"{None if marks is None else marks.count(3)} positions as audio")


if __name__ == "__main__":
    main(sys.argv[1])
