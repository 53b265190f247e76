"""Which of vLLM's CPU kernel builds an engine runs on: vLLM picks it by what torch reports of
the CPU (`conformance/subjects/kernels.py`); the harness only asks. Each machine tests both
CPUs: what torch reports is substituted in a child process, so an AVX-512 machine sees what a
machine without AVX-512 gets, and the other way round (where the real CPU lacks what is
claimed, the child dies with SIGILL, which is a one-line reason here)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
from test_layers import ROOT, imports

from conformance.subjects import kernels

pytestmark = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                                reason="vLLM's CPU kernel builds per instruction set are x86's")


def cpu_flags() -> set[str]:
    """What the CPU itself offers, from the kernel (not from torch, which the tests patch)."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def claiming(*reports: str) -> str:
    """A prelude that makes torch report exactly these of its `torch.cpu._is_*` checks."""
    lines = ["import torch"]
    for name in kernels.TORCH_REPORTS:
        lines.append(f"torch.cpu.{name} = lambda: {name in reports}")
    return "\n".join(lines)


def test_no_module_of_ours_loads_a_vllm_kernel_library_itself():
    """Loading `vllm._C` (the AVX-512 BF16 build) on a CPU without AVX-512 kills the process:
    only vLLM picks a build (`CpuPlatform.import_kernels()`), by the CPU."""
    found = [f"{path.relative_to(ROOT)}:{line} imports {name}"
             for folder in ("conformance", "fixtures", "impl", "scripts", "benchmarks", "tests")
             for path in sorted((ROOT / folder).rglob("*.py"))
             for line, name in imports(path)
             if name.startswith("vllm._C") or name in ("vllm._C", "vllm._moe_C")]
    assert not found, "\n".join(found)


def test_without_avx512_vllm_picks_its_avx2_build_and_an_engine_can_start():
    found = kernels.in_child(prelude=claiming("_is_avx2_supported"))
    assert found == kernels.Kernels("AVX2", "_C_AVX2", True, None), found


@pytest.mark.parametrize(("claimed", "build", "needs"), [
    (("_is_avx512_supported", "_is_avx2_supported"), "_C_AVX512", {"avx512f"}),
    (("_is_avx512_supported", "_is_avx512_bf16_supported", "_is_avx2_supported"), "_C",
     {"avx512f", "avx512_bf16"}),
])
def test_with_avx512_vllm_picks_that_build_and_a_cpu_without_it_is_a_reason(claimed, build,
                                                                           needs):
    found = kernels.in_child(prelude=claiming(*claimed))
    if needs <= cpu_flags():
        assert (found.build, found.ready, found.reason) == (build, True, None), found
    else:  # this CPU cannot run that build: the child dies, this process does not
        assert not found.ready and found.reason and "killed the process" in found.reason, found
        assert "\n" not in found.reason


def test_a_probe_killed_by_its_kernels_is_a_one_line_reason():
    found = kernels.in_child(prelude="import os, signal; os.kill(os.getpid(), signal.SIGILL)")
    assert not found.ready and found.build is None
    assert found.reason.startswith("loading vLLM's CPU kernels killed the process (SIGILL)")
    assert "\n" not in found.reason


def test_the_cap_makes_a_process_run_as_a_cpu_without_avx512_would():
    env = dict(os.environ, **{kernels.CAP_VARIABLE: "avx2"})
    found = kernels.in_child(env=env)
    assert (found.cpu, found.build, found.ready) == ("AVX2", "_C_AVX2", True), found
    done = subprocess.run([sys.executable, "-c", "from conformance.subjects.kernels import "
                           "cap_from_environ; cap_from_environ(); import os, torch; "
                           "print(os.environ['ATEN_CPU_CAPABILITY'], "
                           "torch.backends.cpu.get_cpu_capability())"],
                          capture_output=True, text=True, env=env, check=True)
    assert done.stdout.split() == ["avx2", "AVX2"]  # torch's own kernels too
    bad = dict(os.environ, **{kernels.CAP_VARIABLE: "avx1024"})
    reason = kernels.in_child(env=bad).reason
    assert reason and "CONFORMANCE_CPU_ISA='avx1024': give one of avx512, avx2" in reason


def test_the_library_a_process_mapped_is_the_build_it_runs():
    maps = ("7f00-7f01 r-xp 0 08:01 1 /v/lib/python3.11/site-packages/vllm/_C_AVX2.abi3.so\n"
            "7f02-7f03 r--p 0 08:01 1 /v/lib/python3.11/site-packages/vllm/_C_AVX2.abi3.so\n"
            "7f04-7f05 r-xp 0 08:01 2 /v/lib/python3.11/site-packages/torch/lib/libc10.so\n"
            "7f06-7f07 r-xp 0 08:01 3 /v/lib/python3.11/site-packages/vllm/fs_io_C.abi3.so\n"
            "7f0a-7f0b r-xp 0 08:01 4 /w/vllm-0.33.0/vllm/_C_stable_libtorch.abi3.so\n"
            "7f08-7f09 rw-p 0 00:00 0\n")
    assert kernels.mapped_builds(maps) == ["_C_AVX2"]


def test_a_build_with_no_kernels_for_this_cpu_makes_model_cells_n_a(monkeypatch):
    from conformance.checks import get_check
    from conformance.results.verdict import CellKey
    from conformance.run.cell import run_checkpoint
    from conformance.subjects.vllm import engine_unavailable
    from fixtures.registry import get_recipe

    missing = kernels.Kernels("AVX2", None, False, "vLLM loaded no kernels for this CPU (none "
                              "loaded; the build ships _C, _C_AVX512; ...)")
    monkeypatch.setattr(kernels, "probe", lambda: missing)
    reason = engine_unavailable("cpu")
    assert reason.endswith(f": {missing.reason}")
    key = CellKey("llava", "5.17.0", "vllm-backend", "generate")
    verdict = run_checkpoint(key, get_recipe("llava"), get_check("generate"),
                             lambda: pytest.fail("no checkpoint is needed"))
    assert (verdict.status, verdict.detail) == ("n/a", reason)


@pytest.mark.model
@pytest.mark.parametrize("cap", [None, "avx2"])
def test_an_engine_cell_runs_on_the_build_vllm_picks_and_names_it(cap, tmp_path):
    """On whatever this machine has, and as a CPU without AVX-512 (the AVX2 build, torch's
    AVX2 kernels): the same verdict, the build named in the cell."""
    env = dict(os.environ)
    env.pop(kernels.CAP_VARIABLE, None)
    if cap:
        env[kernels.CAP_VARIABLE] = cap
    expected = kernels.in_child(env=env)
    assert expected.ready, expected
    done = subprocess.run([sys.executable, "-m", "conformance.run.worker", "--fixtures", "llava",
                           "--checks", "generate", "--subjects", "vllm-backend"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    from conformance.run.worker import MARK

    verdicts = [json.loads(line[len(MARK):]) for line in done.stdout.splitlines()
                if line.startswith(MARK)]
    assert len(verdicts) == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert verdicts[0]["status"] == "pass", verdicts[0]
    assert verdicts[0]["data"]["kernels"] == f"{expected.build} ({expected.cpu})"


COMPILED_LAYER_NORM = """
from conformance.subjects.kernels import cap_from_environ
cap_from_environ()
import torch

@torch.compile(backend="inductor")
def layer_norm(x, weight, eps: float):  # native Command R's layer_norm_func, as vLLM 0.31.0's
    mean = x.mean(-1, keepdim=True)
    variance = (x - mean).pow(2).mean(-1, keepdim=True)
    return weight * ((x - mean) * torch.rsqrt(variance + eps))

x, weight = torch.randn(1, 64), torch.randn(64)
for _ in range(200):  # what it writes past its output lands in the allocations that follow
    out = layer_norm(x, weight, 1e-5)
    kept = [torch.empty(64) for _ in range(50)]
expected = weight * torch.nn.functional.layer_norm(x, (64,), eps=1e-5)
print(float((out - expected).abs().max()))
"""


@pytest.mark.e2e
def test_a_capped_process_never_leaves_kernels_for_the_cpus_own_processes(tmp_path):
    """torch.compile's cache keys a graph without the vector width it was written for: a graph
    compiled under the AVX2 cap, built later for AVX-512 in an uncapped process, writes past
    its buffers (glibc aborts: "corrupted size vs. prev_size"). The cap's processes cache their
    kernels apart (kernels.inductor_cache_dir), so the uncapped one compiles its own."""
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"),
               OMP_NUM_THREADS="1")
    env.pop(kernels.CAP_VARIABLE, None)
    for cap in ("avx2", None):  # the capped process first: it fills the cache
        run_env = dict(env, **({kernels.CAP_VARIABLE: cap} if cap else {}))
        done = subprocess.run([sys.executable, "-c", COMPILED_LAYER_NORM], capture_output=True,
                              text=True, env=run_env, cwd=ROOT, timeout=600)
        assert done.returncode == 0, (cap, done.returncode, done.stderr[-300:])
        assert float(done.stdout.split()[-1]) < 1e-5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inductor", "inductor-cpu-isa-avx2"]
