"""Run one cell (fixture x transformers version x subject x check) in-process: its verdict.

Smoke checks (`processing`, `model`) compare vLLM's backend with native vLLM on the recipe's
own prompt; suite checks (checks/) drive a subject over hypothesis-generated cases.
"""

from __future__ import annotations

import os
import time
import traceback

from conformance.checks import CHECK_IDS
from conformance.smoke import MODEL_CHECKS, SMOKE_CHECKS
from conformance.smoke import run_cell as run_smoke_cell
from conformance.verdict import CellKey, Verdict

ALL_CHECKS = (*SMOKE_CHECKS, *MODEL_CHECKS, *CHECK_IDS)


def run_cell(key: CellKey) -> Verdict:
    import transformers

    from conformance.context import fixture_path
    from fixtures.registry import get_recipe

    started = time.monotonic()
    if key.version != transformers.__version__:
        return Verdict(key.fixture, key.version, key.check, "error",
                       f"worker runs transformers {transformers.__version__}, not {key.version}",
                       subject=key.subject)
    try:
        recipe = get_recipe(key.fixture)
    except KeyError as error:
        return Verdict(key.fixture, key.version, key.check, "error", str(error).strip('"'),
                       subject=key.subject)
    if key.check in SMOKE_CHECKS or key.check in MODEL_CHECKS:
        verdict = run_smoke_cell(recipe, key.check, key.version,
                                 fixture_path)
        verdict.subject = key.subject
        return verdict
    if not recipe.supports(key.version):
        return Verdict(key.fixture, key.version, key.check, "n/a",
                       f"{recipe.architecture} not in transformers {key.version}",
                       subject=key.subject)
    from conformance.suite import run_suite

    try:  # a fault planted on purpose (bisect's demonstration): impl only
        fault = os.environ.get("CONFORMANCE_FAULT") if key.subject == "impl" else None
        result = run_suite(key.fixture, key.subject, key.check, fault=fault)
    except Exception as error:
        tail = "".join(traceback.format_exception_only(type(error), error)).strip()
        return Verdict(key.fixture, key.version, key.check, "error", tail,
                       time.monotonic() - started, subject=key.subject)
    data = {"examples": result.examples, "oracle_failures": result.oracle_failures}
    if result.reproducer:
        data["reproducer"] = result.reproducer
        data["case"] = result.case.to_json() if result.case else None
    if result.oracle_note:
        data["oracle_note"] = result.oracle_note
    return Verdict(key.fixture, key.version, key.check, result.status, result.evidence,
                   time.monotonic() - started, data, key.subject)
