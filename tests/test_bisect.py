"""The binary search over releases, with a fake probe: every first bad release is found with
as few probes as a binary search needs, and bad endpoints are refused with a clear message.
(tests/test_cli.py runs it end to end: real workers on real releases, a planted fault.)"""

from __future__ import annotations

import math

import pytest

from conformance.results.evidence import Difference, Evidence
from conformance.results.verdict import Verdict
from conformance.run.bisect import bisect

RELEASES = [f"5.{minor}.{patch}" for minor in range(12, 18) for patch in (0, 1)]


def probe_failing_from(first_bad: str | None, probed: list[str]):
    def probe(version: str) -> Verdict:
        probed.append(version)
        bad = first_bad is not None and RELEASES.index(version) >= RELEASES.index(first_bad)
        return Verdict("llava", version, "placeholders", "fail" if bad else "pass",
                       "ranges differ" if bad else "")

    return probe


@pytest.mark.parametrize("first_bad", RELEASES[1:])
def test_bisect_finds_every_first_bad_release_in_log2_probes(first_bad):
    probed: list[str] = []
    found = bisect(RELEASES, probe_failing_from(first_bad, probed), log=lambda _: None)
    index = RELEASES.index(first_bad)
    assert (found.first_bad, found.last_good) == (first_bad, RELEASES[index - 1])
    assert len(probed) == len(set(probed)) <= 2 + math.ceil(math.log2(len(RELEASES) - 1))
    assert found.verdicts[first_bad].status == "fail"


def test_bisect_refuses_endpoints_that_are_not_good_then_bad():
    with pytest.raises(ValueError, match="the cell is fail on the good version 5.12.0, already"):
        bisect(RELEASES, probe_failing_from("5.12.0", []), log=lambda _: None)
    with pytest.raises(ValueError, match="the cell is pass on 5.17.1, not bad"):
        bisect(RELEASES, probe_failing_from(None, []), log=lambda _: None)


# --- by finding: where a known finding appears or disappears -------------------------------

from conformance.expectations import Finding  # noqa: E402
from conformance.run.bisect import bisect_finding, shows  # noqa: E402

FINDING = Finding(id="ranges-shift", title="t", reason="ranges shift by one", fixtures=("llava",),
                  evidence={"placeholders": ("ranges differ",)}, versions=">=5.15")


def verdict(version: str, status: str, finding: str = "", detail: str = "",
            differences: tuple[str, ...] = (), explained: dict[str, str] | None = None
            ) -> Verdict:
    """A cell with `detail`, or (`differences`) with evidence as the judge records it: each
    difference explained by the finding `explained` names for it (a known cell's by its
    own), the first unexplained one shown."""
    if not differences:
        return Verdict("llava", version, "placeholders", status, detail, finding=finding)
    by = explained or {}
    found = tuple(Difference.of(t, finding=by.get(t, finding if status == "xfail" else ""))
                  for t in differences)
    shown = next((i for i, d in enumerate(found) if not d.finding), 0)
    return Verdict("llava", version, "placeholders", status, finding=finding,
                   evidence=Evidence(found, shown))


def shown(version: str) -> Verdict:
    return verdict(version, "xfail", FINDING.id, differences=("ranges differ",))


def probe_showing(showing, probed: list[str], otherwise=lambda v: verdict(v, "pass")):
    """A probe whose cell shows the finding on the releases `showing(index)` says."""
    def probe(version: str) -> Verdict:
        probed.append(version)
        return shown(version) if showing(RELEASES.index(version)) else otherwise(version)

    return probe


@pytest.mark.parametrize("first", range(1, len(RELEASES)))
def test_bisect_finding_finds_where_it_appears_and_where_it_disappears(first):
    probed: list[str] = []
    found = bisect_finding(RELEASES, probe_showing(lambda i: i >= first, probed), FINDING,
                           log=lambda _: None)
    assert (found.first, found.last, found.appears) == (RELEASES[first], RELEASES[first - 1],
                                                         True)
    assert len(probed) == len(set(probed)) <= 2 + math.ceil(math.log2(len(RELEASES) - 1))
    gone = bisect_finding(RELEASES, probe_showing(lambda i: i < first, []), FINDING,
                          log=lambda _: None)
    assert (gone.first, gone.last, gone.appears) == (RELEASES[first], RELEASES[first - 1], False)


def test_a_finding_shows_outside_its_bounds_by_its_evidence_but_not_in_another_finding():
    # outside its recorded bounds the judge cannot name it: an unexplained difference that
    # carries its evidence is the finding showing; one another finding explains is not
    assert shows(verdict("5.13.0", "fail", detail="ranges differ at item 0"), FINDING)
    assert shows(verdict("5.13.0", "fail", differences=("ids differ", "ranges differ"),
                         explained={"ids differ": "other-finding"}), FINDING)
    assert not shows(verdict("5.13.0", "fail", differences=("ids", "ranges differ"),
                             explained={"ranges differ": "other-finding"}), FINDING)
    assert not shows(verdict("5.13.0", "xfail", "other-finding", differences=("ranges differ",)),
                     FINDING)
    assert shows(verdict("5.13.0", "xfail", "other-finding", differences=("ids", "ranges differ"),
                         explained={"ids": "other-finding", "ranges differ": FINDING.id}),
                 FINDING)
    assert not shows(verdict("5.13.0", "xpass", FINDING.id), FINDING)  # listed, did not show
    # so the search finds where the difference began, not where the bounds say
    early = probe_showing(lambda i: i >= 6, [], otherwise=lambda v: (
        verdict(v, "fail", detail="ranges differ at item 0")
        if RELEASES.index(v) >= 3 else verdict(v, "pass")))
    found = bisect_finding(RELEASES, early, FINDING, log=lambda _: None)
    assert (found.first, found.appears) == (RELEASES[3], True)


def test_bisect_finding_refuses_ends_alike_naming_their_statuses_and_a_cell_that_cannot_run():
    other = lambda v: verdict(v, "xfail", "other-finding", "something else")  # noqa: E731
    with pytest.raises(ValueError, match=r"ranges-shift shows on neither 5\.12\.0 \(xfail "
                                         r"\(finding other-finding\)\) and 5\.17\.1 \(xfail"):
        bisect_finding(RELEASES, probe_showing(lambda i: False, [], other), FINDING,
                       log=lambda _: None)
    with pytest.raises(ValueError, match="shows on both 5.12.0"):
        bisect_finding(RELEASES, probe_showing(lambda i: True, []), FINDING, log=lambda _: None)
    broken = probe_showing(lambda i: i >= 9, [], otherwise=lambda v: (
        verdict(v, "error", detail="worker died") if v == RELEASES[5] else verdict(v, "pass")))
    with pytest.raises(ValueError, match=r"the cell is error on 5\.14\.1: it cannot say whether "
                                         r"ranges-shift shows: worker died"):
        bisect_finding(RELEASES, broken, FINDING, log=lambda _: None)


def test_a_plain_bisect_refusal_names_the_cells_status_and_its_finding():
    with pytest.raises(ValueError, match=r"the cell is xfail \(finding ranges-shift\) on 5\.17\.1, "
                                         r"not bad: use --finding ranges-shift to find when it "
                                         r"appeared"):
        bisect(RELEASES, probe_showing(lambda i: i >= 4, []), log=lambda _: None)


def test_bisect_command_by_finding_derives_the_cell_and_prints_where_it_appears(monkeypatch,
                                                                               capsys):
    """`conformance bisect --finding ID`: the cell from the baseline's cells showing it, the
    search over the releases given, probed by a fake (no worker, no overlay)."""
    from conformance import expectations
    from conformance.cli import bisect as command
    from conformance.cli import main
    from conformance.run import bisect as search
    from conformance.run import versions

    finding = expectations.get("gemma3-offsets-newlines")
    probed: list[tuple[str, str, str, str]] = []

    def probe_cell(fixture, subject, check, fault=None, vllm=None):
        def probe(version: str) -> Verdict:
            probed.append((fixture, subject, check, version))
            on = RELEASES.index(version) >= 6
            return Verdict(fixture, version, check, "xfail", "newlines [observed: [331, 332]",
                           subject=subject, finding=finding.id if on else "other")
        return probe

    baseline = [Verdict("gemma3", "5.24.0", check, "xfail", subject=subject, finding=finding.id)
                for check in ("prompt-ids", "cache") for subject in ("vllm-backend", "impl")]
    monkeypatch.setattr(command, "_baseline", lambda: baseline)
    monkeypatch.setattr(search, "probe_cell", probe_cell)
    monkeypatch.setattr(versions, "resolve_up_front", lambda *a, **k: versions.UpFront())
    # impl's cell first (no engine), then in the order the finding lists its evidence
    code = main(["bisect", "--finding", finding.id, "--versions", ",".join(RELEASES)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert {cell[:3] for cell in probed} == {("gemma3", "impl", "prompt-ids")}
    assert "bisecting finding gemma3-offsets-newlines on gemma3 / impl / prompt-ids over 12 " \
           "releases 5.12.0 .. 5.17.1; 3 other cell(s) show it" in out
    assert ("gemma3-offsets-newlines appears in transformers 5.15.0 (last release without it: "
            "5.14.1)") in out


def test_bisect_refuses_a_malformed_version_and_an_unknown_finding_in_one_line(capsys):
    from conformance.cli import main

    assert main(["bisect", "--arch", "llava", "--check", "placeholders", "--good", "5.15",
                 "--bad", "5.17.0"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: not a transformers release: '5.15' (a release is MAJOR.MINOR.PATCH, e.g. 5.24.0)"]
    assert main(["bisect", "--finding", "no-such-finding"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "no finding 'no-such-finding'" in err[0]
    assert main(["bisect", "--arch", "llava"]) == 2
    assert "bisect needs --arch, --check, --good and --bad (or --finding ID)" in \
        capsys.readouterr().err


def test_bisect_stops_at_a_release_between_the_ends_that_cannot_be_installed(monkeypatch,
                                                                            capsys):
    from conformance.cli import main
    from conformance.run import bisect as search
    from conformance.run import versions

    def resolve(version: str, vllm: str = "0.31.0", without: tuple[str, ...] = ()):
        if version == "5.14.1":  # the first release the search probes between the ends
            raise versions.NotInstallable(version, vllm, "it requires kernels>=0.19.1 and the "
                                          "package index has only kernels<=0.17.2",
                                          "kernels>=0.19.1")
        return (f"transformers=={version}",)

    def probe_cell(fixture, subject, check, fault=None, vllm=None):
        return probe_failing_from("5.15.0", [])

    monkeypatch.setattr(versions, "_DECIDED", {})
    monkeypatch.setattr(versions, "resolve_pins", resolve)
    monkeypatch.setattr(search, "probe_cell", probe_cell)
    monkeypatch.setattr(search, "released_versions", lambda good, bad: RELEASES)  # the index's
    code = main(["bisect", "--arch", "llava", "--check", "placeholders", "--good", "5.12.0",
                 "--bad", "5.17.1"])
    assert code == 1
    assert capsys.readouterr().err.splitlines() == [
        "error: transformers 5.14.1 cannot be installed: it requires kernels>=0.19.1 and the "
        "package index has only kernels<=0.17.2 (to run it without that requirement: "
        "--allow-unmet kernels, docs/versions.md); leave it out with --versions"]
    # releases given by hand are all resolved before the first probe
    assert main(["bisect", "--arch", "llava", "--check", "placeholders",
                 "--versions", ",".join(RELEASES), "--good", "5.12.0", "--bad", "5.17.1"]) == 2
    assert "transformers 5.14.1 cannot be installed" in capsys.readouterr().err
