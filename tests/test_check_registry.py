"""The catalogue of checks is discovered, its ids unique, and docs/checks.md shows it."""

from pathlib import Path

from conformance.checks import ORDER, checks_markdown, registry
from conformance.subjects.faults import FAULTS, MEDIA_FAULTS


def test_every_check_is_discovered_in_the_run_order():
    assert tuple(registry()) == ORDER


def test_every_check_declares_a_statement_a_hint_and_a_known_fault():
    for check in registry().values():
        assert check.statement.endswith(".") and check.hint, check.id
        assert check.proof.fault in {*FAULTS, *MEDIA_FAULTS}, check.id
        assert check.level in ("case", "checkpoint"), check.id
        assert not check.loads_model or check.level == "checkpoint", check.id


def test_the_checks_document_shows_the_registry():
    document = (Path(__file__).resolve().parent.parent / "docs" / "checks.md").read_text()
    assert checks_markdown() in document, (
        "regenerate docs/checks.md's table with `conformance checks`")
