"""A vLLM plugin (`vllm.general_plugins`) that gives a CUDA-only release's Python an engine on
an x86 CPU without Triton: the one vLLM runs itself on CPUs without Triton (its standalone CPU
runner, `v1/worker/cpu/`), which from 0.34.0 on vLLM takes only off x86.

Only a graft carries its entry point (run/cpu_engine.py: the release's wheel, a CPU build's
kernels and the top-up ops beside its `vllm/`), so no other vLLM loads it. vLLM calls it in
every process that builds an engine config or runs a worker. It:
- loads the top-up ops (`vllm/_C_topup.abi3.so`) after the kernels vLLM picks for the CPU;
- lifts the platform's one refusal ('vLLM on x86 CPUs requires Triton (triton-cpu).', the
  only use of HAS_TRITON in `check_and_update_config`) and answers True to
  `uses_standalone_cpu_model_runner` where there is no Triton.
It writes nothing into vLLM's files; what changes is two class methods in memory. Cells name
it (`describe`): the runner, batching and sampler are not the x86 path vLLM ships (that one
needs triton-cpu); the model's forward, the backend and the CPU attention are the same code.
"""

from __future__ import annotations

from pathlib import Path

from conformance.core.catalogue import TOPUP_LIBRARY

RUNNER = "vLLM's standalone CPU runner (x86 without Triton, ops built from its sources)"


def library() -> Path | None:
    import vllm

    found = Path(vllm.__file__).parent / TOPUP_LIBRARY
    return found if found.is_file() else None


def register() -> None:
    found = library()
    if found is None:
        return
    import torch
    from vllm.platforms import current_platform
    from vllm.triton_utils import HAS_TRITON

    if HAS_TRITON or getattr(current_platform, "_conformance_runner", False):
        return  # Triton is here: vLLM's own x86 path; or registered already
    current_platform.import_kernels()  # the ops the top-up adds go beside these
    torch.ops.load_library(str(found))
    platform = type(current_platform)
    checked = platform.check_and_update_config.__func__

    def check_and_update_config(cls, vllm_config) -> None:
        import vllm.triton_utils as triton_utils

        triton_utils.HAS_TRITON = True  # read once there, by its x86 refusal only
        try:
            checked(cls, vllm_config)
        finally:
            triton_utils.HAS_TRITON = False

    platform.check_and_update_config = classmethod(check_and_update_config)
    platform.uses_standalone_cpu_model_runner = classmethod(lambda cls: True)
    platform._conformance_runner = True


def unavailable() -> str | None:
    """Why this vLLM's CPU platform has no model runner here (None: it has one). vLLM 0.34.0
    runs x86 CPUs only with Triton (triton-cpu, on no package index): without it, its engine
    refuses ('vLLM on x86 CPUs requires Triton (triton-cpu).') unless its standalone runner
    is taken, which it takes only off x86 (`uses_standalone_cpu_model_runner`). Earlier
    releases have no such method: they run without Triton on C++ stand-ins for its kernels."""
    from vllm.platforms import CpuArchEnum, current_platform
    from vllm.plugins import load_general_plugins
    from vllm.triton_utils import HAS_TRITON

    load_general_plugins()  # a graft's runner plugin (subjects/cpu_runner.py) answers here too
    standalone = getattr(current_platform, "uses_standalone_cpu_model_runner", None)
    if HAS_TRITON or standalone is None or standalone():
        return None
    if current_platform.get_cpu_architecture() != CpuArchEnum.X86:
        return None
    return ("its CPU engine needs Triton on x86 (triton-cpu, on no package index: 'vLLM on x86 "
            "CPUs requires Triton (triton-cpu).') and takes its standalone runner only off x86, "
            "and no runner plugin is loaded (run/cpu_engine.py); its processing is tested, "
            "not its models")


def describe() -> str | None:
    """What runs the engine where the plugin took over (None: vLLM's own choice)."""
    try:
        from vllm.platforms import current_platform
    except ImportError:
        return None
    return RUNNER if getattr(current_platform, "_conformance_runner", False) else None
