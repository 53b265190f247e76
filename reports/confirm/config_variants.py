"""One checkpoint, three readers: the HF model, vLLM's Transformers backend and native vLLM
score the same image prompt (vLLM, transformers and torch only).

    python config_variants.py CHECKPOINT PROMPT

For the config variants of fixtures/variants/ (issue #33): a fixture built with a few config
fields set as a published checkpoint sets them. The harness builds one and prints its folder
(`conformance fixtures build --fixtures llava~saved`); this script reads the folder alone.
fp32 on CPU, one seeded 56x40 image; each vLLM implementation runs in a child process of its
own. Prints the config fields
that matter (tie flags, logits_scaling, vision_feature_layer), each side's prompt length and
top-5 next-token logprobs, or the error it raised loading the checkpoint, and the largest
|difference| of each pair on the HF model's top-10 tokens.
Exit 1: two sides that ran differ by more than 1e-4, or one side cannot load what the HF model
serves (reproduces); exit 0: all three agree.
"""

import json
import os
import subprocess
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
FIELDS = ("tie_word_embeddings", "vision_feature_layer", "vision_feature_select_strategy",
          "multimodal_projector_bias", "scale_factor")
TEXT_FIELDS = ("model_type", "tie_word_embeddings", "logits_scaling", "logit_scale")


def image():
    import numpy as np
    from PIL import Image

    return Image.fromarray(np.random.RandomState(0).randint(0, 256, (40, 56, 3), dtype=np.uint8))


def hf(path, prompt):
    import torch
    import transformers
    from transformers import AutoConfig, AutoProcessor

    config = AutoConfig.from_pretrained(path)
    raw = json.load(open(os.path.join(path, "config.json")))
    shown = {f: raw.get(f, "(absent)") for f in FIELDS if f in raw or hasattr(config, f)}
    text = raw.get("text_config", {})
    shown.update({f"text_config.{f}": text[f] for f in TEXT_FIELDS if f in text})
    print(f"config.json: {shown}")
    model = getattr(transformers, config.architectures[0]).from_pretrained(
        path, dtype=torch.float32).eval()
    inputs = AutoProcessor.from_pretrained(path)(text=prompt, images=[image()],
                                                 return_tensors="pt")
    with torch.inference_mode():
        logits = model(**inputs).logits[0, -1].float()
    return inputs["input_ids"].shape[1], dict(enumerate(torch.log_softmax(logits, -1).tolist()))


def engine(path, prompt, impl):
    import vllm

    llm = vllm.LLM(model=path, model_impl=impl, dtype="float32", max_model_len=1024,
                   max_num_seqs=1, limit_mm_per_prompt={"image": 1}, enforce_eager=True,
                   kv_cache_memory_bytes=64 << 20, mm_processor_cache_gb=0, seed=0)
    out = llm.generate({"prompt": prompt, "multi_modal_data": {"image": [image()]}},
                       vllm.SamplingParams(temperature=0.0, max_tokens=1, logprobs=20),
                       use_tqdm=False)[0]
    logprobs = out.outputs[0].logprobs[0]
    return len(out.prompt_token_ids), {int(t): v.logprob for t, v in logprobs.items()}


def last_error(text):
    """The engine's last exception line; for a bare `assert`, the statement that fired."""
    lines = [line.split("]: ", 1)[-1].strip() for line in text.splitlines()]
    errors = [line for line in lines if line.endswith("Error") or "Error: " in line]
    if errors and errors[-1].endswith("AssertionError"):
        asserts = [line for line in lines if line.startswith("assert ")]
        where = [line for line in lines if line.startswith("File ")]
        return (f"AssertionError: {asserts[-1] if asserts else ''} "
                f"({where[-1] if where else ''})")[:400]
    return (errors[-1] if errors else text.strip()[-400:])[:400]


def scale(sides, a, b):
    """", b's logit gaps are a's times F" where one factor F explains every shared top token
    (log-softmax keeps differences of logits: a scaled head scales the gaps to the top one)."""
    la, lb = sides[a][1], sides[b][1]
    top = max(la, key=la.get)
    ratios = [(lb[t] - lb[top]) / (la[t] - la[top]) for t in sorted(la, key=la.get)[-10:]
              if t != top and t in lb and top in lb and abs(la[t] - la[top]) > 1e-3]
    if len(ratios) < 2 or max(ratios) - min(ratios) > 1e-3 * abs(ratios[0]) or \
            abs(ratios[0] - 1) < 1e-3:
        return ""
    return f"; {b}'s logit gaps are {a}'s times {sum(ratios) / len(ratios):.4g}"


def main():
    if sys.argv[1] == "--engine":
        _, _, path, prompt, impl = sys.argv
        print("RESULT " + json.dumps(engine(path, prompt, impl)))
        return
    path, prompt = sys.argv[1], sys.argv[2]
    import transformers
    import vllm

    print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}; {path}")
    sides = {"hf": hf(path, prompt)}
    failed = False
    for impl, name in (("transformers", "vLLM backend"), ("vllm", "native vLLM")):
        run = subprocess.run([sys.executable, __file__, "--engine", path, prompt, impl],
                             capture_output=True, text=True)
        line = [x for x in run.stdout.splitlines() if x.startswith("RESULT ")]
        if not line:
            print(f"{name:14s} ERROR loading or running it: {last_error(run.stderr)}")
            failed = True
            continue
        n, logprobs = json.loads(line[-1][7:])
        sides[name] = (n, {int(k): v for k, v in logprobs.items()})
    ref = sides["hf"][1]
    top10 = sorted(ref, key=ref.get, reverse=True)[:10]
    for name, (n, lp) in sides.items():
        top = sorted(lp, key=lp.get, reverse=True)[:5]
        print(f"{name:14s} prompt {n:3d} tokens, top-5 "
              "{" + ", ".join(f"{t}: {lp[t]:.5f}" for t in top) + "}")
    names, worst = list(sides), 0.0
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            common = [t for t in top10 if t in sides[a][1] and t in sides[b][1]]
            d = max(abs(sides[a][1][t] - sides[b][1][t]) for t in common) if common else 0.0
            worst = max(worst, d)
            print(f"  {a} vs {b}: max |d logprob| on the HF top-10 = {d:.3e}{scale(sides, a, b)}")
    sys.exit(1 if failed or worst > 1e-4 else 0)


if __name__ == "__main__":
    main()
