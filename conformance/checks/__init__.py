"""The catalogue of checks, discovered: every module under this package that defines `CHECK`.

A new check is one module here (or under `model/`) with its `CHECK = Check(...)` and the
planted fault that proves it can fail; the plan, the cell runner, bisect, `check`'s hints, the
table in docs/checks.md and the planted-fault tests all read this registry.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

from conformance.checks.contract import PASS, Check, NotApplicable, Outcome

# Order of the checks in a run (and in docs/checks.md's table): the checkpoint-level checks first.
ORDER = ("processing", "profiling", "dummy-data", "model", "encoder", "mrope", "generate",
         "pooling", "prompt-ids", "placeholders", "embed-count", "cache", "slicing", "errors")


@functools.cache
def registry() -> dict[str, Check]:
    found: dict[str, Check] = {}
    for package in ("conformance.checks", "conformance.checks.model"):
        for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
            module = importlib.import_module(f"{package}.{info.name}")
            check = getattr(module, "CHECK", None)
            if not isinstance(check, Check):
                continue
            if check.id in found:
                raise RuntimeError(f"check id {check.id!r} is declared twice "
                                   f"({module.__name__} and another module)")
            found[check.id] = check
    order = {cid: i for i, cid in enumerate(ORDER)}
    return dict(sorted(found.items(), key=lambda item: (order.get(item[0], len(order)),
                                                        item[0])))


def get_check(check_id: str) -> Check:
    checks = registry()
    if check_id not in checks:
        raise KeyError(f"unknown check {check_id!r} (known: {', '.join(checks)})")
    return checks[check_id]


def check_ids(level: str | None = None) -> tuple[str, ...]:
    return tuple(c.id for c in registry().values() if level is None or c.level == level)


def checks_markdown() -> str:
    """The table of checks in docs/checks.md (a test keeps it in sync with the registry)."""
    rows = ["| check | level | what it states | compared with | proven by the planted fault |",
            "|---|---|---|---|---|"]
    for check in registry().values():
        proofs = "; ".join(f"`{proof.fault}` on {proof.fixture}"
                           for proof in (check.proof, *check.more_proofs))
        rows.append(f"| `{check.id}` | {check.level} | {check.statement} | "
                    f"{check.compared_with} | {proofs} |")
    return "\n".join(rows) + "\n"


__all__ = ["PASS", "Check", "NotApplicable", "Outcome", "check_ids", "checks_markdown", "get_check",
           "registry"]
