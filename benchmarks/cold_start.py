"""Cold start of every implementation of each tiny fixture, measured in one process.

For each fixture: native vLLM and vLLM's Transformers backend built engine-free (vLLM's model
classes and weight loading via `get_model`, no engine), the plain transformers model impl drives,
and both again as an `LLM(...)` engine. Imports and the process group are set up first and
reported on their own line, so the per-fixture numbers are what the model checks pay per model.
The target is at most 5 s per fixture (engine-free, all three loads together).

    .venv/bin/python benchmarks/cold_start.py [--no-llm] [--json OUT] [fixture ...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

TARGET_S = 5.0
COLUMNS = ("free:vllm", "free:transformers", "hf", "llm:vllm", "llm:transformers")


def measure_fixture(name: str, with_llm: bool) -> dict[str, float | str]:
    from conformance.checks import model as mc
    from fixtures.build import build_fixture
    from fixtures.registry import get_recipe

    recipe, path = get_recipe(name), str(build_fixture(name))
    loads = {
        "free:vllm": lambda: mc.build_vllm_model(path, mc.NATIVE, mc.limits_for(recipe),
                                                 "cpu", "float32"),
        "free:transformers": lambda: mc.build_vllm_model(path, mc.BACKEND, mc.limits_for(recipe),
                                                         "cpu", "float32"),
        "hf": lambda: mc.build_hf_model(path, "cpu", "float32"),
    }
    if with_llm:
        loads["llm:vllm"] = lambda: mc.build_llm(path, mc.NATIVE, mc.limits_for(recipe),
                                                 "float32")
        loads["llm:transformers"] = lambda: mc.build_llm(path, mc.BACKEND,
                                                         mc.limits_for(recipe), "float32")
    row: dict[str, float | str] = {}
    for column, load in loads.items():
        started = time.perf_counter()
        try:
            loaded = load()
        except Exception as error:  # a fixture that does not load is a result too
            row[column] = f"err:{type(error).__name__}"
            row[f"{column} error"] = mc.error_text(error)[:300]
            continue
        row[column] = time.perf_counter() - started
        del loaded
        mc.ensure_distributed()  # a collected engine tears the process group down
    return row


def cell(value: float | str | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if isinstance(value, float) else value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fixtures", nargs="*", help="default: every available fixture")
    parser.add_argument("--no-llm", action="store_true", help="engine-free loads only")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    from conformance.checks import model as mc
    from fixtures.build import build_fixture
    from fixtures.registry import available_recipes

    names = args.fixtures or list(available_recipes())
    for name in names:
        build_fixture(name)  # cached builds; not part of a cold start
    imports = time.perf_counter() - started
    prepared = mc.prepare(engine=not args.no_llm)
    print(f"imports {imports:.2f} s, one-off vLLM set-up {prepared:.2f} s (not counted below)")

    rows = {name: measure_fixture(name, not args.no_llm) for name in names}
    print(f"{'fixture':<16}" + "".join(f"{c:>20}" for c in COLUMNS)
          + f"{'free total':>12}{'llm total':>11}")
    for name, row in rows.items():
        free = [row.get(c) for c in COLUMNS[:3]]
        engine = [row.get(c) for c in COLUMNS[3:]]
        free_total = sum(free) if all(isinstance(v, float) for v in free) else None
        llm_total = (sum(engine) if engine and all(isinstance(v, float) for v in engine)
                     else None)
        flag = "" if free_total is None or free_total <= TARGET_S else "  > target"
        print(f"{name:<16}" + "".join(f"{cell(row.get(c)):>20}" for c in COLUMNS)
              + f"{cell(free_total):>12}{cell(llm_total):>11}{flag}")
    for name, row in rows.items():
        for key, value in row.items():
            if key.endswith(" error"):
                print(f"{name} {key}: {value}")
    if args.json:
        args.json.write_text(json.dumps({"imports_s": imports, "setup_s": prepared,
                                         "fixtures": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
