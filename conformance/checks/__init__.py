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


def impl_profiles_markdown(labels: tuple[str, ...] | None = None) -> str:
    """The README's table of what `impl` reproduces under each vLLM of the default axis: the
    release profile it follows and that profile's behaviour steps (impl/release.py; a test
    keeps the README in step with it)."""
    # lazy: core.vllms reads the baseline (the default axis), which listing the checks needs not
    from conformance.core.vllms import default_axis, impl_profile
    from impl.release import FIRST_RELEASE, STEPS

    rows = [f"| vLLM | `impl` follows | behaviour steps since {FIRST_RELEASE} (impl/release.py) |",
            "|---|---|---|"]
    for label in labels or default_axis():
        profile = impl_profile(label)
        if profile is None:
            rows.append(f"| {label} | no profile | |")
            continue
        landed: dict[str, list[str]] = {}
        for step in (s for s in STEPS if profile.has(s)):
            landed.setdefault(step.since, []).append(f"`{step.name}`")
        steps = "; ".join(f"{', '.join(names)} ({since})" for since, names in landed.items())
        rows.append(f"| {label} | {profile.name}'s backend | {steps or 'none: the first'} |")
    return "\n".join(rows) + "\n"


__all__ = ["PASS", "Check", "NotApplicable", "Outcome", "check_ids", "checks_markdown", "get_check",
           "impl_profiles_markdown", "registry"]
