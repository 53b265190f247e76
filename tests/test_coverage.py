"""`conformance coverage`: the candidates transformers ships and vLLM's route for each."""

import pytest

from conformance.cli.coverage import fixtures_by_architecture, table
from conformance.inputs.coverage import BACKEND_ONLY, FALLBACK, NATIVE


def candidate(model_type, architecture, vllm=NATIVE, moe=False):
    return {"model_type": model_type, "architecture": architecture, "base_class": None,
            "processor": None, "vllm": vllm, "encoder_decoder": False,
            "attention_interface": True, "token_counts": True, "moe": moe}


def test_the_table_marks_each_model_type_per_version_with_its_fixture():
    probes = [
        {"transformers": "5.12.1", "candidates": [candidate("llava", "LlavaForX")]},
        {"transformers": "5.17.0", "candidates": [
            candidate("llava", "LlavaForX"), candidate("emu3", "Emu3ForX", BACKEND_ONLY),
            candidate("kimi", "KimiForX", FALLBACK, moe=True)]},
    ]
    lines = table(probes, {"LlavaForX": ["llava", "pixtral"]})
    assert lines[0] == "| model type | class | vLLM | MoE | fixture | 5.12.1 | 5.17.0 |"
    assert "| emu3 | Emu3ForX | backend-only |  | – | – | ✓ |" in lines
    assert "| kimi | KimiForX | fallback | yes | – | – | ✓ |" in lines
    assert "| llava | LlavaForX | native |  | llava, pixtral | ✓ | ✓ |" in lines
    assert lines[-1] == ("3 model types; 1 with a fixture; 1 served only through the backend, "
                         "1 unknown to vLLM's registry (the backend is its fallback); "
                         "1 with experts")


@pytest.mark.vllm
def test_the_probe_reads_transformers_and_vllms_registry():
    # the environment's transformers (5.17.0) and vLLM (0.31.0): the facts the issue measured
    from conformance.inputs.coverage import probe

    found = {c["architecture"]: c for c in probe()["candidates"]}
    for backend_only in ("Emu3ForConditionalGeneration", "HunYuanVLForConditionalGeneration",
                         "VibeVoiceAsrForConditionalGeneration"):
        assert found[backend_only]["vllm"] == BACKEND_ONLY
    assert found["LlavaForConditionalGeneration"]["vllm"] == NATIVE
    assert found["FuyuForCausalLM"]["vllm"] == FALLBACK
    assert found["Qwen3VLMoeForConditionalGeneration"]["moe"]
    assert not found["Qwen3VLForConditionalGeneration"]["moe"]
    assert found["T5Gemma2ForConditionalGeneration"]["encoder_decoder"]
    # every fixture's architecture is a candidate: coverage is measured against the same list
    assert set(fixtures_by_architecture()) <= set(found)
