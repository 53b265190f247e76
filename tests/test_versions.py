import os
import subprocess
import sys
from pathlib import Path

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
     ("5.17.0", "offsets", True), ("5.20.2", "offsets", False), ("5.22.2", "offsets", False),
     ("5.25.0", "offsets", False)],
)
def test_full_versions_cover_both_strategies_and_the_window(version, strategy, inside):
    assert version in versions.FULL_VERSIONS
    assert placeholder_strategy(version) == strategy
    assert versions.in_vllm_window(version) is inside


def test_every_full_matrix_version_is_pinned_in_the_overlay_lock():
    table = versions._read_locked_overlays()
    for version in versions.FULL_VERSIONS:
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


# --- versions resolved up front: one line per version that cannot be installed ------------

# uv's own words (uv 0.13, no TTY), for the causes the resolver gives
LAGGING = """error: No solution found when resolving dependencies
  cause: Because only kernels<=0.17.2 is available and transformers>=5.25.0 depends on kernels>=0.19.1,<0.20, we can conclude that transformers>=5.25.0 cannot be used.
         And because you require transformers==5.25.0, we can conclude that your requirements are unsatisfiable.
"""  # noqa: E501
MISSING = """error: No solution found when resolving dependencies
  cause: Because there is no version of transformers==9.9.9 and you require transformers==9.9.9, we can conclude that your requirements are unsatisfiable.
"""  # noqa: E501
PINNED = """  × No solution found when resolving dependencies:
  ╰─▶ Because transformers==5.30.0 depends on torch>=2.14 and you require torch==2.13.0, we can conclude that your requirements and transformers==5.30.0 are incompatible.
"""  # noqa: E501


def test_the_resolvers_cause_is_one_line_naming_the_unmet_requirement():
    assert versions.resolver_cause(LAGGING) == (
        "it requires kernels>=0.19.1,<0.20 and the package index has only kernels<=0.17.2",
        "kernels>=0.19.1,<0.20")
    assert versions.resolver_cause(MISSING) == ("transformers==9.9.9 is not on the package index",
                                                "")
    assert versions.resolver_cause(PINNED) == (
        "it requires torch>=2.14 and the environment pins torch==2.13.0", "torch>=2.14")
    assert versions.resolver_cause("error: Failed to fetch: `https://pypi.org/simple/x/`\n") \
        == ("error: Failed to fetch: `https://pypi.org/simple/x/`", "")


def fake_resolver(calls: list | None = None):
    """An index where 5.25.0 needs a kernels the index lacks and 9.9.9 does not exist."""
    def resolve(version: str, vllm: str = "0.31.0", without: tuple[str, ...] = ()):
        if calls is not None:
            calls.append((version, vllm, without))
        if version == "9.9.9":
            raise versions.NotInstallable(version, vllm, *versions.resolver_cause(MISSING))
        if version == "5.25.0" and "kernels" not in without:
            raise versions.NotInstallable(version, vllm, *versions.resolver_cause(LAGGING))
        return (f"transformers=={version}",)

    return resolve


def test_up_front_one_line_per_version_that_cannot_be_installed(monkeypatch):
    monkeypatch.setattr(versions, "_DECIDED", {})
    calls: list = []
    outcome = versions.resolve_up_front(["5.17.0", "5.24.0", "5.25.0", "9.9.9", "5.12.1"],
                                        ["0.31.0", "0.32.0"], resolver=fake_resolver(calls),
                                        log=lambda _: None)
    assert outcome.problems == [
        "transformers 5.25.0 cannot be installed: it requires kernels>=0.19.1,<0.20 and the "
        "package index has only kernels<=0.17.2 (to run it without that requirement: "
        "--allow-unmet kernels, docs/versions.md)",
        "transformers 9.9.9 cannot be installed: transformers==9.9.9 is not on the package index",
        "transformers 5.25.0 cannot be installed over vLLM 0.32.0's environment: it requires "
        "kernels>=0.19.1,<0.20 and the package index has only kernels<=0.17.2 (to run it "
        "without that requirement: --allow-unmet kernels, docs/versions.md)",
        "transformers 9.9.9 cannot be installed over vLLM 0.32.0's environment: "
        "transformers==9.9.9 is not on the package index",
    ]
    # the environment's own version needs nothing; below 0.32.0's window, 5.12.1 is n/a there
    assert ("5.17.0", "0.31.0", ()) not in calls and ("5.12.1", "0.32.0", ()) not in calls
    assert outcome.meta() == {}


def test_allow_unmet_resolves_without_the_requirement_and_says_so(monkeypatch):
    monkeypatch.setattr(versions, "_DECIDED", {})
    said: list[str] = []
    outcome = versions.resolve_up_front(["5.25.0"], ["0.31.0"], allow_unmet=["kernels"],
                                        resolver=fake_resolver(), log=said.append)
    assert outcome.problems == []
    assert outcome.meta() == {"unmet_requirements": {"5.25.0": ["kernels>=0.19.1,<0.20"]}}
    assert said == ["transformers 5.25.0: runs without kernels>=0.19.1,<0.20 (--allow-unmet "
                    "kernels); its results say so"]
    # the overlay installed later follows that resolution, in a folder of its own
    decided = versions._DECIDED[("5.25.0", "0.31.0")]
    assert decided.without == ("kernels",)
    assert versions.overlay_dir("5.25.0", "0.31.0", decided.without).name == \
        "transformers-5.25.0-without-kernels"
    # never the default, and an allowance nothing needed is said, not silently kept
    assert versions.resolve_up_front(["5.25.0"], ["0.31.0"], resolver=fake_resolver(),
                                     log=lambda _: None).problems
    said.clear()
    versions.resolve_up_front(["5.24.0"], ["0.31.0"], allow_unmet=["kernels"],
                              resolver=fake_resolver(), log=said.append)
    assert said == ["--allow-unmet kernels: no requested version lacks it; nothing left out"]


@pytest.mark.parametrize(("text", "error"), [
    ("5.23", "not a transformers release: '5.23' (a release is MAJOR.MINOR.PATCH, e.g. 5.24.0)"),
    ("abc", "not a transformers release: 'abc' (a release is MAJOR.MINOR.PATCH, e.g. 5.24.0)"),
    ("v5.24.0", "not a transformers release as written: 'v5.24.0' (write 5.24.0)"),
    ("5.24.0+cpu", "not a transformers release: '5.24.0+cpu' (a release is MAJOR.MINOR.PATCH, "
                   "e.g. 5.24.0)"),
])
def test_a_malformed_version_is_refused_by_the_one_parser(text, error):
    with pytest.raises(ValueError) as refused:
        versions.requested_version(text)
    assert str(refused.value) == error
    assert versions.requested_versions("5.24.0, 5.15.0rc1") == ("5.24.0", "5.15.0rc1")
    assert versions.requested_versions("") == versions.DEFAULT_VERSIONS
    assert versions.requested_versions("full") == versions.FULL_VERSIONS


def test_the_main_job_runs_each_vllm_on_its_paths_newest_and_the_candidate():
    """The default columns (docs/performance.md): inside each vLLM's window the newest version
    of each placeholder path (the Legacy path stays: 5.14.1), and the newest version (the gate's
    candidate) on every vLLM; 5.12.1, 5.15.1 and the versions between are the full matrix's."""
    assert versions.DEFAULT_VERSIONS == versions.FULL_VERSIONS[1:]
    assert "5.14.1" in versions.DEFAULT_VERSIONS and "5.12.1" not in versions.DEFAULT_VERSIONS
    columns = {(v, t) for v in ("0.31.0", "0.33.0") for t in versions.DEFAULT_VERSIONS
               if versions.default_column(v, t)}
    assert columns == {("0.31.0", "5.14.1"), ("0.31.0", "5.17.0"), ("0.31.0", "5.25.0"),
                       ("0.33.0", "5.20.2"), ("0.33.0", "5.25.0")}
    assert versions.default_column("0.31.0", "5.14.1", ("5.14.1",))  # the newest asked for
    assert not versions.default_column("0.31.0", "5.12.1")  # in its window, not in the default
    # the newest of its path among the versions asked for
    assert versions.default_column("0.31.0", "5.15.1", ("5.14.1", "5.15.1", "5.25.0"))
    assert versions.requested_versions("rest") == versions.FULL_VERSIONS


def test_rest_runs_the_full_matrix_cells_the_main_job_leaves_out():
    """`--versions rest` and the main job together are the full matrix, with no cell twice."""
    def columns(requested):
        asked = versions.requested_versions(requested)
        return {(v, t) for v in ("0.31.0", "0.33.0") for t in asked
                if versions.runs_column(requested, v, t, asked)}

    main_job, rest, full = columns(None), columns("rest"), columns("full")
    assert not main_job & rest and main_job | rest == full
    assert len(full) == 2 * len(versions.FULL_VERSIONS)
    assert {("0.31.0", "5.15.1"), ("0.33.0", "5.17.0"), ("0.31.0", "5.12.1")} <= rest
    assert columns("5.15.1") == {("0.31.0", "5.15.1"), ("0.33.0", "5.15.1")}


@pytest.mark.parametrize("command", [
    ["run", "--fixtures", "llava"], ["versions", "install"], ["exec", "--", "true"],
    ["check", "no/such-checkpoint"],
])
def test_commands_refuse_a_malformed_version_in_one_line_before_anything(command, capsys,
                                                                        monkeypatch):
    monkeypatch.setattr(versions, "ensure_overlay", None)  # nothing may get that far
    option = "--transformers" if command[0] in ("exec", "check") else "--versions"
    argv = command[:1] + [option, "5.23"] + command[1:]
    from conformance.cli import main

    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: not a transformers release: '5.23' (a release is MAJOR.MINOR.PATCH, e.g. 5.24.0)"]


def test_run_exits_2_on_a_version_that_cannot_be_installed_without_writing_cells(
        tmp_path, capsys, monkeypatch):
    from conformance.cli import main

    monkeypatch.setattr(versions, "_DECIDED", {})
    monkeypatch.setattr(versions, "resolve_pins", fake_resolver())
    output = tmp_path / "run"
    code = main(["run", "--vllm", "0.31.0", "--fixtures", "llava", "--checks", "prompt-ids",
                 "--versions", "5.24.0,5.25.0,9.9.9", "--output", str(output)])
    err = capsys.readouterr().err.splitlines()
    assert code == 2
    assert [line.split(":")[1].strip() for line in err] == [
        "transformers 5.25.0 cannot be installed", "transformers 9.9.9 cannot be installed"]
    assert not output.exists()  # no folder, no error cells


# --- the weekly workflow's candidate: the newest release that installs ---------------------

def test_newest_installable_skips_newer_releases_saying_why():
    calls: list = []
    index = ["5.23.0", "5.9.0", "5.25.0", "9.9.9", "5.24.0"]
    assert versions.newest_installable(index, resolver=fake_resolver(calls)) == (
        "5.24.0", [("9.9.9", "transformers==9.9.9 is not on the package index"),
                   ("5.25.0", "it requires kernels>=0.19.1,<0.20 and the package index has only "
                              "kernels<=0.17.2")])
    assert [c[0] for c in calls] == ["9.9.9", "5.25.0", "5.24.0"]  # newest first, then stop
    assert versions.newest_installable(["9.9.9"], resolver=fake_resolver())[0] is None


def test_versions_newest_prints_the_version_alone_and_the_skipped_on_stderr(capsys, monkeypatch):
    from conformance.cli import main

    monkeypatch.setattr(versions, "index_releases", lambda: ["5.24.0", "5.25.0"])
    monkeypatch.setattr(versions, "resolve_pins", fake_resolver())
    assert main(["versions", "newest"]) == 0
    out, err = capsys.readouterr()
    assert out == "5.24.0\n"
    assert err.splitlines() == ["skipped transformers 5.25.0: it requires kernels>=0.19.1,<0.20 "
                                "and the package index has only kernels<=0.17.2"]


def test_the_weekly_workflow_gates_the_newest_installable_release():
    import yaml

    workflow = yaml.safe_load((Path(__file__).resolve().parent.parent / ".github" / "workflows"
                               / "transformers-upgrade.yml").read_text())
    jobs = workflow["jobs"]
    pick = "\n".join(step.get("run", "") for step in jobs["candidate"]["steps"])
    assert "conformance versions newest --vllm \"$VLLM\"" in pick
    assert "conformance versions install --versions \"$REQUESTED\"" in pick  # one line if not
    assert jobs["matrix"]["needs"] == "candidate"
    shard = "\n".join(step.get("run", "") for step in jobs["matrix"]["steps"])
    assert "--versions ${{ needs.candidate.outputs.version }}" in shard


@pytest.mark.parametrize("command", [["check", "no/such-checkpoint", "--transformers", "5.25.0"],
                                     ["versions", "install", "--versions", "5.25.0"],
                                     ["exec", "--transformers", "5.25.0", "--", "true"]])
def test_other_commands_say_why_a_version_cannot_be_installed_in_one_line(command, capsys,
                                                                         monkeypatch):
    from conformance.cli import main

    monkeypatch.setattr(versions, "_DECIDED", {})
    monkeypatch.setattr(versions, "resolve_pins", fake_resolver())
    assert main(command) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: transformers 5.25.0 cannot be installed: it requires kernels>=0.19.1,<0.20 and "
        "the package index has only kernels<=0.17.2"]


def test_a_run_without_a_requirement_says_so_in_its_results_and_reports(tmp_path):
    from conformance.results import report
    from conformance.results.verdict import Verdict

    meta = versions.UpFront(resolutions=[versions.Resolution(
        "5.25.0", "0.31.0", ("transformers==5.25.0",), ("kernels",),
        ("kernels>=0.19.1,<0.20",))]).meta()
    report.write_reports(tmp_path, [Verdict("llava", "5.25.0", "prompt-ids", "pass")], meta)
    assert report.read_results(tmp_path / "results.json")[1]["unmet_requirements"] == {
        "5.25.0": ["kernels>=0.19.1,<0.20"]}
    assert "**transformers 5.25.0 ran without kernels>=0.19.1,<0.20**" in \
        (tmp_path / "report.md").read_text()
    html = (tmp_path / "report.html").read_text()
    assert "requirements a version ran without (--allow-unmet)" in html
    assert "5.25.0: kernels&gt;=0.19.1,&lt;0.20" in html
