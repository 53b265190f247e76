#!/usr/bin/env python3
"""Can vLLM's Transformers backend serve Voxtral Realtime? (vLLM and transformers only)

    .venv/bin/conformance exec --transformers 5.25.0 -- \\
        .venv/bin/python /abs/reports/confirm/voxtral_realtime_unservable.py [WORKDIR]

Writes a checkpoint folder (no weights: the failure is in processing, before any weight is read)
with VoxtralRealtimeConfig's defaults (its docstring names mistralai/Voxtral-Mini-4B-Realtime-2602;
UNCHECKED against the hub's params.json), VoxtralRealtimeFeatureExtractor's defaults and a tiny
tekken.json (256 byte tokens and the Voxtral control tokens as fixtures/recipes/voxtral.py
writes them) with the realtime audio settings (16 kHz, 12.5 tokens a second, 128 mel bins, hop
160, window 400, transcription_format "streaming", 480 ms delay, 2.5 ms look-ahead, 52.5 ms
look-back, 32 left pad tokens: unchecked against the hub files). Readings:
1. transformers: VoxtralRealtimeProcessor.__call__'s signature (no `text`), what it returns for
   one audio (input_ids of the transcription request it writes itself), and whether it has the
   hooks the backend needs (_get_num_multimodal_tokens, replace_audio_token);
2. vLLM (model_impl="transformers", tokenizer_mode="mistral"): the class it resolves, the audio
   budget, and the backend's processor on a prompt with one audio: the error it raises.
Exit 1 when the backend's processor refuses the audio (reproduces).
"""

import base64
import inspect
import json
import os
import sys
import tempfile
import traceback

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import numpy as np  # noqa: E402
import transformers  # noqa: E402

CONTROL = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]",
           "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]",
           "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]", "[MIDDLE]", "[SUFFIX]",
           "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]"]
SPECIALS = {**dict(enumerate(CONTROL)), 24: "[AUDIO]", 25: "[BEGIN_AUDIO]", 32: "[ARGS]",
            33: "[CALL_ID]", 34: "[TRANSCRIBE]", 35: "[STREAMING_PAD]", 36: "[STREAMING_WORD]"}
NUM_SPECIALS = 40
PATTERN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
           r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}|"
           r" ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
AUDIO = {"sampling_rate": 16000, "frame_rate": 12.5,
         "audio_encoding_config": {"num_mel_bins": 128, "hop_length": 160, "window_size": 400},
         "transcription_format": "streaming", "transcription_delay_ms": 480,
         # recalled, UNCHECKED against the hub's tekken.json (mistral_common requires them set)
         "streaming_look_ahead_ms": 2.5, "streaming_look_back_ms": 52.5,
         "streaming_n_left_pad_tokens": 32}


def one_line(error: BaseException) -> str:
    while error.__cause__ is not None:
        error = error.__cause__
    frames = traceback.extract_tb(error.__traceback__)
    file = '/'.join(frames[-1].filename.split('/')[-3:]) if frames else ""
    where = f" (at {file}:{frames[-1].lineno})" if frames else ""
    return f"{type(error).__name__}: {str(error).splitlines()[0][:400]}{where}"


def write(folder: str) -> None:
    vocab = [{"rank": i, "token_bytes": base64.b64encode(bytes([i])).decode(), "token_str": None}
             for i in range(256)]
    specials = [{"rank": i, "token_str": SPECIALS.get(i, f"<SPECIAL_{i}>"), "is_control": True}
                for i in range(NUM_SPECIALS)]
    tekken = {"config": {"pattern": PATTERN, "num_vocab_tokens": 256, "version": "v7",
                         "default_vocab_size": 256 + NUM_SPECIALS,
                         "default_num_special_tokens": NUM_SPECIALS},
              "vocab": vocab, "special_tokens": specials, "audio": AUDIO}
    with open(os.path.join(folder, "tekken.json"), "w") as stream:
        json.dump(tekken, stream)
    config = transformers.VoxtralRealtimeConfig()
    config.architectures = ["VoxtralRealtimeForConditionalGeneration"]
    config.save_pretrained(folder)
    transformers.VoxtralRealtimeFeatureExtractor().save_pretrained(folder)


def main(folder: str) -> int:
    import vllm

    write(folder)
    print("vllm", vllm.__version__, "transformers", transformers.__version__)
    from transformers.tokenization_mistral_common import MistralCommonBackend

    tokenizer = MistralCommonBackend(tokenizer_path=os.path.join(folder, "tekken.json"))
    processor = transformers.VoxtralRealtimeProcessor(
        feature_extractor=transformers.VoxtralRealtimeFeatureExtractor(), tokenizer=tokenizer)
    print("1. VoxtralRealtimeProcessor.__call__ parameters:",
          list(inspect.signature(type(processor).__call__).parameters),
          "| _get_num_multimodal_tokens:", hasattr(processor, "_get_num_multimodal_tokens"),
          "| defines replace_audio_token:", "replace_audio_token" in vars(type(processor)))
    wave = np.random.default_rng(1).standard_normal(16000).astype(np.float32) * 0.1
    try:
        out = processor(audio=[wave], return_tensors="pt")
        print("   HF processor, one 1 s audio: keys", sorted(out.keys()),
              "input_ids", out["input_ids"].tolist()[0][:12], "... length",
              out["input_ids"].shape[-1], "input_features", list(out["input_features"].shape))
    except Exception as error:  # noqa: BLE001
        print("   HF processor, one audio:", one_line(error))
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY

    config = ModelConfig(model=folder, model_impl="transformers", tokenizer_mode="mistral",
                         max_model_len=4096, limit_mm_per_prompt={"audio": 1})
    print("2. vLLM resolves", config.architectures, "->", config._model_info.architecture
          if hasattr(config, "_model_info") else "?")
    try:
        mm = MULTIMODAL_REGISTRY.create_processor(config)
        print("   backend processor:", type(mm).__name__, "| processor loaded:",
              type(mm.info.get_hf_processor()).__name__)
        print("   audio budget:", mm.info.get_mm_max_tokens_per_item(4096, {"audio": 1}))
    except Exception as error:  # noqa: BLE001
        print("   backend processor:", one_line(error))
        return 1
    prompt = "[INST][BEGIN_AUDIO][AUDIO][/INST]"
    try:
        out = mm(prompt, mm.info.parse_mm_data({"audio": [(wave, 16000)]}))
        print("   backend processor, one audio: placeholders",
              {m: [(p.offset, p.length) for p in ps] for m, ps in out["mm_placeholders"].items()})
        return 0
    except Exception as error:  # noqa: BLE001
        print("   backend processor, one audio:", one_line(error))
        return 1


if __name__ == "__main__":
    if len(sys.argv) > 1:
        os.makedirs(sys.argv[1], exist_ok=True)
        sys.exit(main(sys.argv[1]))
    with tempfile.TemporaryDirectory() as folder:
        sys.exit(main(folder))
