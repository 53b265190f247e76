"""The layers stand one on another: impl <- fixtures <- conformance, never the other way.

`impl` imports nothing of ours (tests/impl/test_impl_import.py checks all it may import);
`fixtures` may import `impl` but not `conformance`. Checked on the source, by AST, so an import
inside a function (or one by `importlib.import_module("...")`) counts as much as a top-level one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# package -> the packages of ours it must not import
FORBIDDEN = {"fixtures": {"conformance"}, "impl": {"fixtures", "conformance"}}


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, absolute name) of every import in the file, relative ones resolved, by line."""
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: max(0, len(package) - node.level + 1)] if node.level else []
            name = ".".join([*base, *([node.module] if node.module else [])])
            found += [(node.lineno, f"{name}.{alias.name}" if name else alias.name)
                      for alias in node.names]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", None))
            in {"import_module", "__import__"}
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value))
    return sorted(found)


def violations(package: str, root: Path = ROOT) -> list[str]:
    files = sorted((root / package).rglob("*.py"))
    assert files, f"no modules found under {package}/"
    return [
        f"{path.relative_to(root)}:{line} imports {name}"
        for path in files
        for line, name in imports(path, root)
        if name.split(".")[0] in FORBIDDEN[package]
    ]


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_layer_imports_no_layer_above_it(package):
    found = violations(package)
    assert not found, f"{package}/ must not import {sorted(FORBIDDEN[package])}:\n" + "\n".join(
        found
    )


def test_the_scan_sees_every_kind_of_import(tmp_path):
    source = tmp_path / "fixtures" / "sub" / "mod.py"
    source.parent.mkdir(parents=True)
    source.write_text(
        "import conformance.paths\n"
        "from conformance import oracle\n"
        "from ... import conformance\n"
        "def f():\n"
        "    from conformance.versions import parse_version\n"
        "    importlib.import_module('conformance.cli')\n"
        "from . import sibling\n"
        "from ..cache import cache_dir\n"
    )
    assert violations("fixtures", tmp_path) == [
        f"{Path('fixtures/sub/mod.py')}:{line} imports {name}"
        for line, name in [
            (1, "conformance.paths"),
            (2, "conformance.oracle"),
            (3, "conformance"),
            (5, "conformance.versions.parse_version"),
            (6, "conformance.cli"),
        ]
    ]
    assert (7, "fixtures.sub.sibling") in imports(source, tmp_path)
    assert (8, "fixtures.cache.cache_dir") in imports(source, tmp_path)
