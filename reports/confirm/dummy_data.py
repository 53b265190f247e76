"""The dummy item vLLM profiles memory with: native vLLM's vs the Transformers backend's, with
vLLM and transformers only.

    .venv/bin/python reports/confirm/dummy_data.py CHECKPOINT_DIR...

vLLM profiles the encoder with one dummy item per modality (`get_dummy_mm_inputs({m: 1})`,
built by the model's dummy-inputs builder, meant to be its item with the most embeddings). For
each checkpoint (its first modality the backend takes, image before audio) and each
implementation: the dummy item's size, its embeddings once processed, and, to tell which side's
item is not the largest, the embeddings each processor gives the other side's dummy item.
Exit 1 when the two dummy items' embeddings differ for some checkpoint.
"""

import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

IMPLS = ("vllm", "transformers")


def processor_of(path: str, impl: str, limits: dict):
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY

    config = ModelConfig(model=path, model_impl=impl, max_model_len=None,
                         limit_mm_per_prompt=limits)
    return MULTIMODAL_REGISTRY.create_processor(config)


def embeddings(processor, modality: str, item) -> int | str:
    """Embeddings of `item` alone, in the processor's own dummy text (or what it raised)."""
    text = processor.dummy_inputs.get_dummy_text({modality: 1})
    try:
        out = processor(text, processor.info.parse_mm_data({modality: [item]}))
    except Exception as error:  # noqa: BLE001 - reported: the item cannot be served
        return f"an error: {type(error).__name__}: {' '.join(str(error).split())[:200]}"
    return sum(int(r.get_num_embeds()) for r in out["mm_placeholders"][modality])


def dummy(processor, modality: str):
    """The builder's dummy item, its size, and its embeddings as vLLM's profile processes it."""
    config = processor.info.ctx.model_config
    built = processor.get_dummy_inputs(config.max_model_len, {modality: 1},
                                       config.get_multimodal_config().limit_per_prompt)
    items = built.mm_data_items[modality]
    size = (f"{items.get_image_size(0).width}x{items.get_image_size(0).height} (w x h)"
            if modality == "image" else f"{items.get_audio_length(0)} samples")
    placed = processor.get_dummy_mm_inputs({modality: 1})["mm_placeholders"][modality]
    return items.get(0), size, sum(int(r.get_num_embeds()) for r in placed)


def confirm(path: str) -> bool:
    name = os.path.basename(path.rstrip("/"))
    backend = processor_of(path, "transformers", {"image": 1, "audio": 1})
    modality = next(m for m in ("image", "audio") if m in backend.info.get_supported_mm_limits())
    processors = {impl: processor_of(path, impl, {modality: 1}) for impl in IMPLS}
    made = {impl: dummy(processors[impl], modality) for impl in IMPLS}
    for impl, (_, size, n) in made.items():
        other = IMPLS[1 - IMPLS.index(impl)]
        elsewhere = embeddings(processors[impl], modality, made[other][0])
        print(f"{name} {impl}: dummy {modality} {size}, {n} embeddings; the {other} side's "
              f"dummy {modality} ({made[other][1]}) gives it {elsewhere}", flush=True)
    return made["vllm"][2] == made["transformers"][2]


if __name__ == "__main__":
    import transformers
    import vllm

    print("vLLM", vllm.__version__, "transformers", transformers.__version__)
    results = [confirm(path) for path in sys.argv[1:]]
    print("dummy embeddings equal:", all(results))
    sys.exit(0 if all(results) else 1)
