"""The layers stand one on another, and no import runs back up.

Packages: impl <- fixtures <- conformance. `impl` imports nothing of ours
(tests/impl/test_impl_import.py checks all it may import); `fixtures` may import `impl` but not
`conformance`. Inside `conformance`, its floors (CONFORMANCE_FLOORS): the ground floor (`core`,
`paths`: release facts, difference signatures) <- expectations <- inputs <- subjects <- checks
<- results <- run <- cli; a module imports its own floor and those below. Checked on the source,
by AST, so an import inside a function (or one by `importlib.import_module("...")`) counts as
much as a top-level one. An import inside a function that only dodges a cycle (the module it
imports imports this one at its top level) is flagged too: lazy imports are for what is heavy
to load (vLLM, torch), not for hiding a loop.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# package -> the packages of ours it must not import
FORBIDDEN = {"fixtures": {"conformance"}, "impl": {"fixtures", "conformance"}}
# conformance's floors, lowest first; its top-level modules: paths on the ground, the package's
# own __init__/__main__ (the entry points) above cli
CONFORMANCE_FLOORS = ["core", "expectations", "inputs", "subjects", "checks", "results", "run",
                      "cli"]
GROUND = {"paths": "core", "__main__": "cli"}


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


def floor(module: str) -> int | None:
    """The floor of a conformance module (None: not one of ours, or the package itself)."""
    parts = module.split(".")
    if parts[0] != "conformance" or len(parts) < 2:
        return None
    name = GROUND.get(parts[1], parts[1])
    return CONFORMANCE_FLOORS.index(name) if name in CONFORMANCE_FLOORS else None


def upward_imports(root: Path = ROOT) -> list[str]:
    found = []
    for path in sorted((root / "conformance").rglob("*.py")):
        mine = floor(module_name(path, root))
        for line, name in imports(path, root):
            theirs = floor(name)
            if mine is not None and theirs is not None and theirs > mine:
                found.append(f"{path.relative_to(root)}:{line} ({CONFORMANCE_FLOORS[mine]}) "
                             f"imports {name} ({CONFORMANCE_FLOORS[theirs]})")
    return found


def test_no_conformance_import_runs_up_a_floor():
    found = upward_imports()
    assert not found, "imports that climb conformance's floors:\n" + "\n".join(found)


def test_every_conformance_package_has_a_floor():
    packages = {p.name for p in (ROOT / "conformance").iterdir()
                if (p / "__init__.py").exists()}
    modules = {p.stem for p in (ROOT / "conformance").glob("*.py") if p.stem != "__init__"}
    assert packages == set(CONFORMANCE_FLOORS)
    assert modules <= set(GROUND)


def function_imports(path: Path, root: Path = ROOT) -> set[int]:
    """The lines of the imports inside a function of the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return {node.lineno for function in ast.walk(tree)
            if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
            for node in ast.walk(function) if isinstance(node, ast.Import | ast.ImportFrom)}


def cycle_dodges(root: Path = ROOT) -> list[str]:
    """Imports inside a function of a module that the imported module reaches back to from its
    own top level (a package's __init__ loading its own submodules on demand is no cycle)."""
    files = {module_name(p, root): p for package in ("conformance", "fixtures", "impl")
             for p in (root / package).rglob("*.py")}

    def ours(name: str) -> str | None:  # the module an imported name lives in
        parts = name.split(".")
        return next((".".join(parts[:i]) for i in range(len(parts), 0, -1)
                     if ".".join(parts[:i]) in files), None)

    top: dict[str, set[str]] = {}
    inner: dict[str, list[tuple[int, str]]] = {}
    for module, path in files.items():
        lazy = function_imports(path, root)
        found = [(line, ours(name)) for line, name in imports(path, root) if ours(name)]
        top[module] = {m for line, m in found if line not in lazy}
        inner[module] = [(line, m) for line, m in found if line in lazy]

    def reaches(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for target in top.get(todo.pop(), ()):
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        return seen

    return [f"{files[m].relative_to(root)}:{line} imports {target} inside a function, and "
            f"{target} imports {m} at its top level"
            for m in sorted(inner) for line, target in inner[m]
            if not target.startswith(m + ".") and m in reaches(target)]


def test_no_import_inside_a_function_only_dodges_a_cycle():
    found = cycle_dodges()
    assert not found, "\n".join(found)


def test_the_floor_scan_sees_a_climb_and_a_dodged_cycle(tmp_path):
    for package, body in {
        "conformance/__init__.py": "",
        "conformance/core/__init__.py": "",
        "conformance/core/facts.py": "def f():\n    from conformance.run import session\n",
        "conformance/run/__init__.py": "",
        "conformance/run/session.py": "from conformance.run import cell\n",
        "conformance/run/cell.py": "def g():\n    from conformance.run import session\n",
        "fixtures/__init__.py": "", "impl/__init__.py": "",
    }.items():
        (tmp_path / package).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / package).write_text(body)
    assert upward_imports(tmp_path) == [
        f"{Path('conformance/core/facts.py')}:2 (core) imports conformance.run.session (run)"]
    assert cycle_dodges(tmp_path) == [
        f"{Path('conformance/run/cell.py')}:2 imports conformance.run.session inside a "
        "function, and conformance.run.session imports conformance.run.cell at its top level"]


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


# --- module size and lazy imports --------------------------------------------------------------

MAX_MODULE_LINES = 450
MAX_LAZY_IMPORTS = 40  # in-function imports of our own modules in conformance/: fewer than this
OURS = ("conformance", "fixtures", "impl")
LAZY = "# lazy: "


def long_modules(root: Path = ROOT) -> list[str]:
    return [f"{path.relative_to(root)}: {count} lines"
            for path in sorted((root / "conformance").rglob("*.py"))
            if (count := len(path.read_text().splitlines())) > MAX_MODULE_LINES]


def test_no_product_module_is_over_450_lines():
    found = long_modules()
    assert not found, f"modules over {MAX_MODULE_LINES} lines (split them):\n" + "\n".join(found)


def lazy_imports(root: Path = ROOT) -> list[tuple[str, bool]]:
    """Each import of our own modules (conformance, fixtures, impl; a relative one) inside a
    function of conformance/, as "path:line statement", and whether it says why: a comment
    starting `# lazy: ` on its line or above the run of import lines it opens or belongs to
    (a measured import cost, a real cycle)."""
    found = []
    for path in sorted((root / "conformance").rglob("*.py")):
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines), filename=str(path))
        seen: set[int] = set()
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Import):
                    ours = any(a.name.split(".")[0] in OURS for a in node.names)
                elif isinstance(node, ast.ImportFrom):
                    ours = bool(node.level) or (node.module or "").split(".")[0] in OURS
                else:
                    continue
                if ours and node.lineno not in seen:  # a nested function's: counted once
                    seen.add(node.lineno)
                    line = lines[node.lineno - 1]
                    first = node.lineno - 1  # the run of import lines it belongs to
                    while first > 0 and lines[first - 1].strip().startswith(("from ", "import ")):
                        first -= 1
                    above = lines[first - 1].strip() if first > 0 else ""
                    said = LAZY in line or above.startswith(LAZY)
                    found.append((f"{path.relative_to(root)}:{node.lineno} {line.strip()}", said))
    return found


def test_imports_inside_functions_are_few_and_say_why():
    """An import of our own modules goes at the top of the module, unless importing it there
    costs what the importer's users should not pay (torch, transformers or vLLM loaded by
    `conformance --help` or by the subjects package: measure with `python -X importtime`) or
    it breaks a real cycle; then it says which, in a `# lazy: ` comment."""
    found = lazy_imports()
    silent = [where for where, said in found if not said]
    assert not silent, "in-function imports without a `# lazy: ` reason:\n" + "\n".join(silent)
    assert len(found) < MAX_LAZY_IMPORTS, (
        f"{len(found)} in-function imports of our modules (fewer than {MAX_LAZY_IMPORTS}):\n"
        + "\n".join(where for where, _ in found))


def test_the_lazy_import_scan_sees_a_reason_and_its_absence(tmp_path):
    module = tmp_path / "conformance" / "m.py"
    module.parent.mkdir()
    module.write_text("import conformance.core\n"
                      "def f():\n"
                      "    # lazy: torch, +1 s\n"
                      "    import impl.pipeline\n"
                      "    from . import sibling  # lazy: a cycle with m\n"
                      "    import impl.fields\n"
                      "    json = 1\n"
                      "    from fixtures.cache import cache_dir\n")
    assert lazy_imports(tmp_path) == [
        (f"{Path('conformance/m.py')}:4 import impl.pipeline", True),
        (f"{Path('conformance/m.py')}:5 from . import sibling  # lazy: a cycle with m", True),
        (f"{Path('conformance/m.py')}:6 import impl.fields", True),  # under the reason
        (f"{Path('conformance/m.py')}:8 from fixtures.cache import cache_dir", False)]
    (module.parent / "long.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    assert long_modules(tmp_path) == [f"{Path('conformance/long.py')}: 451 lines"]
