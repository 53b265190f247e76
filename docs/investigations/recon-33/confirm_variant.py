"""Next-token logprobs of one image prompt: the HF model, vLLM's Transformers backend and native
vLLM, on the same checkpoint (vLLM, transformers and torch only).

    python confirm_variant.py CHECKPOINT PROMPT [--softcap] [--no-token-type-ids]

fp32 on CPU, one random 56x40 image. Each vLLM implementation runs in a child process of its own
(an engine per process). Prints each side's top-5 logprobs, the prompt length each tokenized to,
and the largest |difference| on the HF model's top-10 tokens. `--softcap` also prints the HF
logits soft-capped by text_config.final_logit_softcapping (what vLLM's logits processor does).
Exit 1 when any two sides differ by more than 1e-4. `--no-token-type-ids` feeds the HF model
without the processor's token_type_ids: PaliGemma's HF model then attends causally over the
prefix, as both vLLM implementations do, instead of bidirectionally.
"""

import json
import os
import subprocess
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def image():
    import numpy as np
    from PIL import Image

    return Image.fromarray(np.random.RandomState(0).randint(0, 256, (40, 56, 3), dtype=np.uint8))


def hf(path, prompt, softcap):
    import torch
    import transformers
    from transformers import AutoConfig, AutoProcessor

    arch = AutoConfig.from_pretrained(path).architectures[0]
    model = getattr(transformers, arch).from_pretrained(path, dtype=torch.float32).eval()
    inputs = AutoProcessor.from_pretrained(path)(text=prompt, images=[image()], return_tensors="pt")
    if "--no-token-type-ids" in sys.argv:
        inputs.pop("token_type_ids", None)
    with torch.inference_mode():
        logits = model(**inputs).logits[0, -1].float()
    out = {"hf": (inputs["input_ids"].shape[1], torch.log_softmax(logits, -1).tolist())}
    cap = getattr(model.config.get_text_config(), "final_logit_softcapping", None)
    if softcap and cap:
        out[f"hf softcapped by {cap}"] = (
            inputs["input_ids"].shape[1],
            torch.log_softmax(torch.tanh(logits / cap) * cap, -1).tolist())
    return out


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


def main():
    if sys.argv[1] == "--engine":
        _, _, path, prompt, impl = sys.argv
        try:
            print("RESULT " + json.dumps(engine(path, prompt, impl)))
        except Exception as error:
            print("RESULT " + json.dumps({"error": f"{type(error).__name__}: {error}"[:400]}))
        return
    path, prompt = sys.argv[1], sys.argv[2]
    import transformers
    import vllm

    print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}; {path}")
    sides = {name: (n, dict(enumerate(lp))) for name, (n, lp) in
             hf(path, prompt, "--softcap" in sys.argv).items()}
    ref = sides["hf"][1]
    top10 = sorted(ref, key=ref.get, reverse=True)[:10]
    for impl, name in (("transformers", "vLLM backend"), ("vllm", "native vLLM")):
        run = subprocess.run([sys.executable, __file__, "--engine", path, prompt, impl],
                             capture_output=True, text=True)
        line = [x for x in run.stdout.splitlines() if x.startswith("RESULT ")]
        result = json.loads(line[-1][7:]) if line else {"error": run.stderr.strip()[-400:]}
        if isinstance(result, dict):
            print(f"{name:28s} ERROR {result['error']}")
            continue
        sides[name] = (result[0], {int(k): v for k, v in result[1].items()})
    worst = 0.0
    for name, (n, lp) in sides.items():
        top = sorted(lp, key=lp.get, reverse=True)[:5]
        shown = ", ".join(f"{t}: {lp[t]:.5f}" for t in top)
        print(f"{name:28s} prompt {n:3d} tokens, top-5 {{{shown}}}")
    names = list(sides)  # "hf softcapped ..." is compared too, but does not set the exit status
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            common = [t for t in top10 if t in sides[a][1] and t in sides[b][1]]
            d = (max(abs(sides[a][1][t] - sides[b][1][t]) for t in common)
                 if common else float("nan"))
            if not a.startswith("hf ") and not b.startswith("hf "):
                worst = max(worst, d)
            print(f"  {a} vs {b}: max |d logprob| on the HF top-10 = {d:.3e}")
    sys.exit(1 if worst > 1e-4 else 0)


if __name__ == "__main__":
    main()
