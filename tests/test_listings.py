"""The listing commands: `findings`, `fixtures list` and `checks`, as text and as `--json`."""

import json
from dataclasses import replace

import pytest

from conformance import expectations
from conformance.checks import check_ids
from conformance.cli import build_parser, main
from conformance.cli.env import bounds_text, fixture_bounds
from conformance.core.vllms import releases
from fixtures.registry import available_recipes, get_recipe
from impl.version import parse_version


def output(capsys, *args: str) -> str:
    assert main(list(args)) == 0
    return capsys.readouterr().out


def test_findings_lists_one_line_per_finding(capsys):
    findings = expectations.load()
    lines = output(capsys, "findings").splitlines()
    assert lines[0].split() == ["id", "transformers", "vLLM", "upstream", "checks"]
    rows = lines[1:-1]
    assert [row.split()[0] for row in rows] == [f.id for f in findings]
    assert lines[-1].startswith(f"{len(findings)} findings")
    by_id = dict(zip([f.id for f in findings], rows, strict=True))
    for finding in findings:
        row = by_id[finding.id]
        transformers, vllm = (finding.describe_versions(spec)
                              for spec in (finding.versions, finding.vllm))
        assert row.startswith(f"{finding.id} ") and f" {transformers} " in row
        assert f" {vllm} " in row.split(transformers, 1)[1]
        for link in finding.upstream or ("none filed",):
            assert link in row
    filed = next(f for f in findings if f.upstream)
    assert filed.upstream[0] in by_id[filed.id]
    shadowed = by_id["internvl-processor-shadowed"]  # fixed by vLLM 0.32.0
    assert "<0.32.0" in shadowed


def test_findings_json_has_every_field_of_the_listing(capsys):
    rows = json.loads(output(capsys, "findings", "--json"))
    assert [row["id"] for row in rows] == [f.id for f in expectations.load()]
    row = next(r for r in rows if r["id"] == "internvl-processor-shadowed")
    assert row["vllm"] == {"spec": "<0.32.0", "min": None, "max": "0.32.0", "text": "<0.32.0"}
    assert row["checks"] == ["*"] and row["upstream"] == [] and row["title"]


def test_fixtures_list_shows_each_fixtures_bounds(capsys):
    lines = output(capsys, "fixtures", "list").splitlines()
    assert [line.split()[0] for line in lines] == list(available_recipes())
    assert not any("- .. -" in line for line in lines)
    # each release's window starts where it stops working, and the recipe may start later
    for line in lines:
        recipe = get_recipe(line.split()[0])
        for release in releases().values():
            low = max(filter(None, (recipe.min_transformers, release.window[0])),
                      key=parse_version)
            assert f">={low}" in line and release.version in line.split(f">={low}", 1)[1]
    rows = json.loads(output(capsys, "fixtures", "list", "--json"))
    assert [row["name"] for row in rows] == list(available_recipes())
    assert {v for row in rows for b in row["bounds"] for v in b["vllm"]} == set(releases())


def test_a_fixtures_own_bounds_narrow_the_releases_windows():
    recipe = replace(get_recipe("llava"), min_transformers="5.15.0", max_transformers="5.20.0")
    rows = fixture_bounds(recipe)
    assert [bounds_text(row) for row in rows] == [
        ">=5.15.0,<5.20.0 on vLLM 0.31.0", ">=5.16.1,<5.20.0 on vLLM 0.32.0, 0.33.0"]
    # a recipe whose range closes below a release's window runs nowhere there
    old = replace(recipe, min_transformers=None, max_transformers="5.16.0")
    assert [bounds_text(row) for row in fixture_bounds(old)] == [
        ">=5.10.4,<5.16.0 on vLLM 0.31.0", "none on vLLM 0.32.0, 0.33.0"]


def test_checks_json_lists_the_catalogue(capsys):
    rows = json.loads(output(capsys, "checks", "--json"))
    assert [row["id"] for row in rows] == list(check_ids())
    assert all(row["statement"] and row["proofs"] and row["level"] in ("case", "checkpoint")
               for row in rows)


@pytest.mark.parametrize("command", [["findings"], ["fixtures", "list"], ["checks"],
                                     ["gate", "x"]])
def test_listing_and_gate_commands_take_json(command):
    assert build_parser().parse_args([*command, "--json"]).json


def test_findings_has_help_and_gate_explains_the_nearest_rule(capsys):
    for command in ("findings", "gate"):
        with pytest.raises(SystemExit) as exit_:
            build_parser().parse_args([command, "--help"])
        assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "the newest not newer than it, else the oldest (5.23.0 with 5.20.2)" in text


def test_every_fixture_has_its_row_in_the_fixtures_document():
    """docs/fixtures.md's table lists every registered fixture (the pooling ones were missing
    from it for a while: nothing compared the two)."""
    import re

    from conformance.paths import ROOT
    from fixtures.registry import RECIPE_MODULES

    text = (ROOT / "docs" / "fixtures.md").read_text()
    rows = set(re.findall(r"^\| ([a-z0-9_]+) \|", text, re.MULTILINE))
    assert not set(RECIPE_MODULES) - rows, sorted(set(RECIPE_MODULES) - rows)
