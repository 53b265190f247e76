"""scripts/bootstrap.py: the environments it names (the harness's), the README's test command
(its tiers in order, spread over the CPUs, the first failure its exit code), and the cache lock
the test processes share."""

from __future__ import annotations

import importlib.util
import os
import stat
import threading
import time
from pathlib import Path

import pytest

from conformance.core import vllms
from fixtures.cache import building

ROOT = Path(__file__).resolve().parents[1]


def bootstrap():
    spec = importlib.util.spec_from_file_location("bootstrap", ROOT / "scripts" / "bootstrap.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bootstrap_and_the_harness_name_the_same_environments(monkeypatch, tmp_path):
    monkeypatch.setenv("CONFORMANCE_VENV", str(tmp_path / "env"))
    boot = bootstrap()
    assert boot.DEFAULT_VLLM == vllms.DEFAULT_VLLM
    for version, release in vllms.releases().items():
        assert boot.venv_dir(version) == release.venv
        assert boot.spec_dir(version) == release.spec_dir
    assert vllms.releases()["0.32.0"].venv == tmp_path / "env-vllm-0.32.0"
    assert set(boot.releases()) == set(vllms.releases())


def test_the_environment_holds_its_bytecode():
    """Built by bootstrap (its stamp says so), the environment running these tests holds the
    bytecode of what every process imports: none is compiled again where nothing may write it.
    Its own site-packages, whatever an overlay puts first on the path (the Legacy pass)."""
    import sys
    import sysconfig

    boot = bootstrap()
    stamp = Path(sys.prefix) / boot.STAMP_NAME
    if not stamp.exists():
        pytest.skip(f"{sys.prefix} was not built by scripts/bootstrap.py")
    assert stamp.read_text().strip() == boot.digest(boot.flavor())
    site = Path(sysconfig.get_paths()["purelib"])
    for package in ("torch", "transformers", "vllm"):
        cached = site / package / "__pycache__"
        assert list(cached.glob("__init__.cpython-*.pyc")), f"{package}: no bytecode"


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_the_tiers_run_in_order_spread_over_the_cpus(tmp_path, capfd, monkeypatch):
    python = script(tmp_path / "python", "echo tier output: $*\n")
    script(tmp_path / "conformance",
           "echo exec tier output: $*\ncase $* in *5.12.1*) exit 1;; esac\n")
    boot = bootstrap()
    monkeypatch.setattr(boot.os, "sched_getaffinity", lambda _: {0, 1}, raising=False)
    code = boot.run_default_tests(python, dict(os.environ))
    out = capfd.readouterr().out
    assert code == 1  # the Legacy tier's failure, the two before it having passed
    fast = out.index("tier output: -m pytest -p no:cacheprovider -n 2 -m not model")
    engine = out.index("-n 2 -m (model or e2e)")
    legacy = out.index("exec tier output: exec --transformers 5.12.1 --")
    newest = out.index("exec tier output: exec --vllm newest --")
    assert fast < engine < legacy < newest
    # the Legacy pass re-runs no model check: those faults are proven once, on 5.17.0
    assert f"-m {boot.FAST_TIER} tests/conformance" in out[legacy:newest]
    assert f"-m {boot.IMPL_TIER} tests/impl" in out[newest:]
    assert "exit codes: fast tier: 0, engine tier: 0, legacy tier: 1, impl tier: 0" in out


def test_a_failing_fast_tier_stops_the_run(tmp_path, capfd):
    python = script(tmp_path / "python", "echo tier output: $*\nexit 1\n")
    script(tmp_path / "conformance", "echo exec tier output\n")
    code = bootstrap().run_default_tests(python, dict(os.environ))
    out = capfd.readouterr().out
    assert code == 1
    assert "fast tier failed: the later tiers are not run" in out
    assert "(model or e2e)" not in out and "exec tier output" not in out
    assert "exit codes: fast tier: 1" in out


def test_one_cpu_runs_the_tests_in_one_process(monkeypatch):
    boot = bootstrap()
    monkeypatch.setattr(boot.os, "sched_getaffinity", lambda _: {0}, raising=False)
    assert boot.test_processes() == []
    monkeypatch.setattr(boot.os, "sched_getaffinity", lambda _: set(range(64)), raising=False)
    assert boot.test_processes() == ["-n", str(boot.MAX_TEST_PROCESSES)]


def test_each_test_process_gets_its_share_of_threads(monkeypatch):
    boot = bootstrap()
    monkeypatch.setattr(boot.os, "sched_getaffinity", lambda _: {0, 1}, raising=False)
    assert boot.thread_share({})["OMP_NUM_THREADS"] == "1"  # two processes, a core each
    monkeypatch.setattr(boot.os, "sched_getaffinity", lambda _: set(range(16)), raising=False)
    assert boot.thread_share({})["OMP_NUM_THREADS"] == "4"  # four processes (the bound)
    monkeypatch.setattr(boot.os, "sched_getaffinity", lambda _: {0}, raising=False)
    assert boot.thread_share({})["OMP_NUM_THREADS"] == "1"
    assert boot.thread_share({"OMP_NUM_THREADS": "3"})["OMP_NUM_THREADS"] == "3"  # the caller's


def test_builders_of_one_cache_entry_wait_for_each_other(tmp_path):
    inside, overlaps = [0], []

    def build() -> None:
        with building(tmp_path / "fixture"):
            inside[0] += 1
            overlaps.append(inside[0])
            time.sleep(0.05)
            inside[0] -= 1

    # flock is per open file: threads holding separate opens exclude each other as processes do
    threads = [threading.Thread(target=build) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert overlaps == [1, 1, 1, 1]
