"""`impl` stands without vLLM: importable with vllm blocked, and never names it in an import."""

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

IMPL = Path(__file__).resolve().parents[2] / "impl"
ALLOWED_ROOTS = {"impl", "torch", "numpy", "transformers", "packaging", "__future__"}


def test_impl_imports_with_vllm_blocked() -> None:
    script = textwrap.dedent(
        """
        import importlib, pkgutil, sys

        class BlockVllm:
            def find_spec(self, name, path=None, target=None):
                if name == "vllm" or name.startswith("vllm."):
                    raise ImportError(f"vllm is blocked ({name})")
                return None

        sys.meta_path.insert(0, BlockVllm())
        import impl
        for module in pkgutil.iter_modules(impl.__path__):
            importlib.import_module(f"impl.{module.name}")
        assert not any(n == "vllm" or n.startswith("vllm.") for n in sys.modules)
        try:
            import vllm  # noqa: F401
        except ImportError:
            print("blocked")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=IMPL.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "blocked"


def test_impl_imports_only_allowed_packages() -> None:
    stdlib = set(sys.stdlib_module_names)
    for path in sorted(IMPL.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                roots = [(node.module or "").split(".")[0]]
            else:
                continue
            for root in roots:
                assert root in ALLOWED_ROOTS or root in stdlib, f"{path.name} imports {root}"
