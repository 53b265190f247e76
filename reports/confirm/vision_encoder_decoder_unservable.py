"""Can vLLM's Transformers backend build a vision-encoder-decoder model? (vLLM and transformers
only.)

    python vision_encoder_decoder_unservable.py

VisionEncoderDecoderModel (model type "vision-encoder-decoder") pairs an image encoder with a
text decoder that cross-attends to it. The checkpoint: microsoft/trocr-base-handwritten's layout
as transformers' TrOCR conversion writes it (convert_trocr_unilm_to_pytorch.py: a ViT-base
encoder at 384 px, patch 16; a TrOCR decoder of 12 layers, d_model 1024, 16 heads, ffn 4096,
cross_attention_hidden_size 768, vocab 50265; TrOCRProcessor = ViTImageProcessor + a tokenizer;
unchecked against the hub files), written into a temporary folder with a word-level tokenizer
standing in for RoBERTa's BPE (the attempt is about the model). Readings:
1. the processor vLLM's model config makes (AutoProcessor of the folder);
2. vLLM's `ModelConfig(model_impl="transformers", runner="generate")`: the backend class it
   resolves;
3. that class built as an engine's worker builds it, its parameters on the meta device;
4. the control: transformers' own VisionEncoderDecoderModel built from the same config.
Exit 1 when the backend does not build it while transformers does (reproduces).
"""

import os
import sys
import tempfile

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import torch  # noqa: E402
import transformers  # noqa: E402
import vllm  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402


def one_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"


print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")
folder = tempfile.mkdtemp(prefix="vision-encoder-decoder-")
config = transformers.VisionEncoderDecoderConfig.from_encoder_decoder_configs(
    transformers.ViTConfig(image_size=384, patch_size=16, qkv_bias=False),
    transformers.TrOCRConfig(vocab_size=50265, d_model=1024, decoder_layers=12,
                             decoder_attention_heads=16, decoder_ffn_dim=4096,
                             cross_attention_hidden_size=768, activation_function="gelu",
                             max_position_embeddings=512, use_learned_position_embeddings=True,
                             layernorm_embedding=True, scale_embedding=False,
                             decoder_start_token_id=2, bos_token_id=0, pad_token_id=1,
                             eos_token_id=2),
)
config.architectures = ["VisionEncoderDecoderModel"]
config.decoder_start_token_id, config.pad_token_id, config.eos_token_id = 2, 1, 2
config.save_pretrained(folder)
vocab = {t: i for i, t in enumerate(["<s>", "<pad>", "</s>", "<unk>", "the", "text"])}
raw = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
raw.pre_tokenizer = pre_tokenizers.Whitespace()
tokenizer = transformers.PreTrainedTokenizerFast(
    tokenizer_object=raw, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>")
processor = transformers.TrOCRProcessor(
    image_processor=transformers.ViTImageProcessor(size={"height": 384, "width": 384}),
    tokenizer=tokenizer)
processor.save_pretrained(folder)
loaded = transformers.AutoProcessor.from_pretrained(folder)
print(f"1. AutoProcessor of the folder: {type(loaded).__name__} "
      f"(a ProcessorMixin: {isinstance(loaded, transformers.ProcessorMixin)})")

built = False
try:
    from vllm.config import (
        DeviceConfig,
        LoadConfig,
        ModelConfig,
        VllmConfig,
        set_current_vllm_config,
    )
    from vllm.distributed import parallel_state
    from vllm.model_executor.model_loader.utils import get_model_architecture

    # runner "generate": the class's name ends in "Model", which vLLM would take for pooling
    model_config = ModelConfig(model=folder, model_impl="transformers", dtype="bfloat16",
                               enforce_eager=True, runner="generate")
    model_class, arch = get_model_architecture(model_config)
    print(f"2. vLLM resolves {arch} to {model_class.__name__}")
    vllm_config = VllmConfig(model_config=model_config, device_config=DeviceConfig(device="cpu"),
                             load_config=LoadConfig(load_format="dummy"))
    with set_current_vllm_config(VllmConfig()):
        if not torch.distributed.is_initialized():
            store = f"file://{tempfile.mkdtemp(prefix='attempt-dist-')}/store"
            parallel_state.init_distributed_environment(1, 0, store, 0, "gloo")
        parallel_state.initialize_model_parallel(1, 1)
    with set_current_vllm_config(vllm_config), torch.device("meta"):
        model_class(vllm_config=vllm_config, prefix="")
    built = True
    print("3. the backend builds it")
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    print(f"3. the backend: raised {one_line(error)}")

try:
    with torch.device("meta"):
        transformers.VisionEncoderDecoderModel(config)
    control = "builds"
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    control = f"raised {one_line(error)}"
print(f"4. transformers' VisionEncoderDecoderModel from the same config: {control}")
sys.exit(0 if built else 1)
