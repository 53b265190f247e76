import os
import subprocess
import sys

import pytest

from conformance.run import versions
from impl.version import matches, parse_version, placeholder_strategy


def test_one_parser_orders_releases_and_dev_builds_as_the_backend_does():
    assert parse_version("5.20.2") > parse_version("5.17.0")
    # packaging's Version, as the backend compares: a pre-release is below its release
    assert parse_version("5.15.0.dev0") < parse_version("5.15.0")
    assert placeholder_strategy("5.15.0.dev0") == placeholder_strategy("5.15.0rc1") == "legacy"
    assert matches("5.15.0rc1", "<5.15") and not matches("5.15.0", "<5.15")
    assert matches("5.16.0", ">=5.15,<5.17") and matches("5.16.1", "")


@pytest.mark.parametrize(
    ("version", "strategy", "inside"),
    [("5.12.1", "legacy", True), ("5.14.1", "legacy", True), ("5.15.1", "offsets", True),
     ("5.17.0", "offsets", True), ("5.20.2", "offsets", False), ("5.24.0", "offsets", False)],
)
def test_default_versions_cover_both_strategies_and_the_window(version, strategy, inside):
    assert version in versions.DEFAULT_VERSIONS
    assert placeholder_strategy(version) == strategy
    assert versions.in_vllm_window(version) is inside


def test_every_default_version_is_pinned_in_the_overlay_lock():
    table = versions._read_locked_overlays()
    for version in versions.DEFAULT_VERSIONS:
        if version != versions.ENV_VERSION:
            assert f"transformers=={version}" in table[version]


@pytest.mark.parametrize("version", ["5.12.1", "5.24.0"])
def test_overlay_switches_the_imported_transformers(version):
    overlay = versions.ensure_overlay(version)
    probe = "import transformers, tokenizers; print(transformers.__version__)"
    out = subprocess.run([sys.executable, "-c", probe], env=overlay.environ(),
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == version


def test_environment_version_needs_no_overlay():
    overlay = versions.ensure_overlay(versions.ENV_VERSION)
    assert overlay.path is None and "PYTHONPATH" not in overlay.environ({})


def test_an_overlay_replaces_one_already_active(tmp_path):
    older = versions.ensure_overlay("5.12.1")
    env = versions.ensure_overlay("5.24.0").environ(older.environ({"PYTHONPATH": "/elsewhere"}))
    paths = env["PYTHONPATH"].split(os.pathsep)
    assert str(older.path) not in paths and paths[-1] == "/elsewhere"
    assert versions.ensure_overlay(versions.ENV_VERSION).environ(
        older.environ({}))["CONFORMANCE_TRANSFORMERS"] == versions.ENV_VERSION
    assert "PYTHONPATH" not in versions.ensure_overlay(versions.ENV_VERSION).environ(
        older.environ({}))
