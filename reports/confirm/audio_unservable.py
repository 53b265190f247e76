#!/usr/bin/env python3
"""Why vLLM's Transformers backend cannot serve four speech models (vLLM and transformers only).

    .venv/bin/conformance exec --transformers 5.25.0 -- .venv/bin/python \
        reports/confirm/audio_unservable.py \
        cohere_asr dia moonshine_streaming moss_transcribe_diarize

For each model type: a checkpoint folder with the config of the hub checkpoint transformers'
config docstring names (transformers' defaults, which that docstring says are the checkpoint's;
the fields a default lacks and the real checkpoint's config.json has are set, each said below:
no hub access, UNCHECKED against the hub files), its generative class as the architecture, and
its processor (a word-level tokenizer, the feature extractor, and for Dia a tiny DAC audio
tokenizer); then what vLLM does with it when told to use the backend:
1. `ModelConfig(model=FOLDER, model_impl="transformers")`, which resolves the backend's class;
2. that class built as an engine's worker builds it, its parameters on the meta device (the
   checkpoint's full size, no memory), which runs the backend's own checks of the model.
The control, first, before vLLM is imported: transformers' own class built from the same
folder on the meta device. Prints each model type's readings.
"""

import os
import sys
import tempfile
import traceback

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import torch  # noqa: E402
import transformers  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402

ARCHITECTURES = {
    "cohere_asr": "CohereAsrForConditionalGeneration",
    "dia": "DiaForConditionalGeneration",
    "moonshine_streaming": "MoonshineStreamingForConditionalGeneration",
    "moss_transcribe_diarize": "MossTranscribeDiarizeForConditionalGeneration",
}


def tokenizer() -> PreTrainedTokenizerFast:
    # the placeholder tokens MossTranscribeDiarizeProcessor looks up, then plain words
    specials = ["<unk>", "<s>", "</s>", "<pad>", "<|audio_pad|>", "<|audio_start|>",
                "<|audio_end|>"]
    vocab = {t: i for i, t in enumerate(specials + [f"w{i}" for i in range(200)])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>", pad_token="<pad>")


def checkpoint(model_type: str) -> str:
    folder = tempfile.mkdtemp(prefix=f"unservable-{model_type}-")
    if model_type == "cohere_asr":
        # CohereLabs/cohere-transcribe-03-2026 (the docstring's checkpoint): CohereAsrConfig's
        # defaults, a Parakeet encoder and a Transformer decoder with cross-attention
        config = transformers.CohereAsrConfig()
        processor = transformers.CohereAsrProcessor(
            feature_extractor=transformers.CohereAsrFeatureExtractor(), tokenizer=tokenizer())
    elif model_type == "dia":
        # nari-labs/Dia-1.6B (the docstring's checkpoint): DiaConfig's defaults; its processor
        # holds a DAC audio codec (descript/dac_44khz's layout, tiny here: the processor only)
        config = transformers.DiaConfig()
        dac = os.path.join(folder, "dac")
        transformers.DacModel(transformers.DacConfig(
            encoder_hidden_size=8, decoder_hidden_size=8, hidden_size=8, n_codebooks=2,
            codebook_size=16, codebook_dim=4)).save_pretrained(dac)
        processor = transformers.DiaProcessor(
            feature_extractor=transformers.DiaFeatureExtractor(), tokenizer=tokenizer(),
            audio_tokenizer=transformers.DacModel.from_pretrained(dac))
    elif model_type == "moss_transcribe_diarize":
        # hf-audio/MOSS-Transcribe-Diarize-HF (the docstring's checkpoint): its defaults, a
        # Whisper-style encoder (1024 wide, 16 heads) and a Qwen3 text model
        config = transformers.MossTranscribeDiarizeConfig()
        processor = transformers.MossTranscribeDiarizeProcessor(
            feature_extractor=transformers.MossTranscribeDiarizeFeatureExtractor(),
            tokenizer=tokenizer())
    else:
        # UsefulSensors/moonshine-streaming-tiny (the docstring's checkpoint): its defaults,
        # and num_key_value_heads 8 (= its 8 heads), which the decoder's attention reads and
        # MoonshineStreamingConfig does not declare (the default config does not build without)
        config = transformers.MoonshineStreamingConfig(num_key_value_heads=8)
        processor = transformers.MoonshineStreamingProcessor(
            feature_extractor=transformers.Wav2Vec2FeatureExtractor(), tokenizer=tokenizer())
    config.architectures = [ARCHITECTURES[model_type]]
    config.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def control(folder: str) -> str:
    try:
        config = transformers.AutoConfig.from_pretrained(folder)
        with torch.device("meta"):
            getattr(transformers, config.architectures[0])._from_config(config)
        return "transformers' own class builds (meta device)"
    except Exception as error:  # noqa: BLE001 - the reading
        return f"transformers' own class fails: {type(error).__name__}: {error}"


def where(error: BaseException) -> str:
    frame = traceback.extract_tb(error.__traceback__)[-1]
    return f"{frame.filename.split('site-packages/')[-1]}:{frame.lineno}"


def attempt(folder: str) -> None:
    from vllm.config import (
        DeviceConfig,
        LoadConfig,
        ModelConfig,
        VllmConfig,
        set_current_vllm_config,
    )
    from vllm.distributed import parallel_state
    from vllm.model_executor.model_loader.utils import get_model_architecture

    try:
        model_config = ModelConfig(model=folder, model_impl="transformers", dtype="bfloat16",
                                   enforce_eager=True)
        model_class, _ = get_model_architecture(model_config)
        hf_config = model_config.hf_config
        print(f"  1. ModelConfig: the backend's class {model_class.__name__}; vLLM's config "
              f"{type(hf_config).__module__}.{type(hf_config).__name__}")
        audio = getattr(hf_config, "audio_config", None)
        if audio is not None:
            print(f"     its audio_config: {type(audio).__name__}, hidden_size "
                  f"{getattr(audio, 'hidden_size', None)}, num_attention_heads "
                  f"{getattr(audio, 'num_attention_heads', None)}")
    except Exception as error:  # noqa: BLE001 - the reading
        print(f"  1. ModelConfig raised {type(error).__name__}: {' '.join(str(error).split())}"
              f" at {where(error)}")
        return
    vllm_config = VllmConfig(model_config=model_config, device_config=DeviceConfig(device="cpu"),
                             load_config=LoadConfig(load_format="dummy"))
    with set_current_vllm_config(vllm_config):
        if not parallel_state.model_parallel_is_initialized():
            store = f"file://{tempfile.mkdtemp(prefix='unservable-dist-')}/store"
            parallel_state.init_distributed_environment(1, 0, store, 0, "gloo")
            parallel_state.initialize_model_parallel(1, 1)
        try:
            with torch.device("meta"):
                model_class(vllm_config=vllm_config, prefix="")
            print("  2. build: built")
        except Exception as error:  # noqa: BLE001 - the reading
            print(f"  2. build raised {type(error).__name__}: {' '.join(str(error).split())}"
                  f" at {where(error)}")


if __name__ == "__main__":
    folders = {name: checkpoint(name) for name in sys.argv[1:]}
    controls = {name: control(folder) for name, folder in folders.items()}
    import vllm

    print("vLLM", vllm.__version__, "transformers", transformers.__version__)
    for name, folder in folders.items():
        print(f"{name} ({ARCHITECTURES[name]}): {controls[name]}")
        attempt(folder)
