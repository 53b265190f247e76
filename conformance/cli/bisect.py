"""`conformance bisect`: the first transformers release where a cell goes bad, or where a known
finding appears or disappears (`--finding`)."""

from __future__ import annotations

import argparse

from conformance import expectations
from conformance.checks import check_ids, get_check
from conformance.cli.common import BASELINE, csv, fail
from conformance.core.subjects import IMPL, VLLM_BACKEND
from conformance.core.vllms import DEFAULT_VLLM
from conformance.expectations import ANY
from conformance.results import report
from conformance.results.verdict import Verdict
from conformance.run import bisect, environments, versions
from conformance.run.plan import CHECKPOINT_SUBJECT
from conformance.run.versions import FULL_VERSIONS, requested_version, requested_versions
from conformance.subjects.faults import Fault


def add_arguments(bis: argparse.ArgumentParser) -> None:
    bis.add_argument("--arch", help="fixture name, e.g. gemma3 (with --finding: derived from "
                     "the finding's cells)")
    bis.add_argument("--check", help="check id, e.g. prompt-ids (with --finding: derived)")
    bis.add_argument("--subject", help="default: impl (vllm-backend for checkpoint-level checks)")
    bis.add_argument("--finding", metavar="ID", help="find the first release where this known "
                     "finding appears or disappears (`conformance known`), instead of where the "
                     "cell goes bad")
    bis.add_argument("--good", help="a release where the cell is good; with --finding, the "
                     f"oldest end of the search (default: the matrix's oldest, "
                     f"{FULL_VERSIONS[0]})")
    bis.add_argument("--bad", help="a release where the cell is bad; with --finding, the newest "
                     f"end (default: the full matrix's newest, {FULL_VERSIONS[-1]})")
    bis.add_argument("--versions", help="comma-separated releases to search (default: every "
                     "stable release between --good and --bad on the package index)")
    bis.add_argument("--vllm", help="the vLLM under test, fixed while transformers moves: a "
                     f"release or a folder holding a vllm package (default: {DEFAULT_VLLM})")
    bis.add_argument("--fault", help="plant an impl fault, e.g. 'offset-shift>=5.16.1' (demo)")
    bis.add_argument("--allow-unmet", metavar="DEP", help="as `run --allow-unmet`: packages "
                     "whose requirement a release may be probed without")


def finding_cells(finding, baseline: list | None = None) -> list[tuple[str, str, str]]:
    """(fixture, subject, check) of the cells that show `finding` in the baseline, else those
    its entry names (its fixtures x subjects x checks, none of them "*"); impl's first (no
    engine to load), then in the order the entry lists its fixtures and its evidence."""
    cells = {(v.fixture, v.subject, v.check) for v in baseline or [] if v.finding == finding.id}
    if not cells:
        checks = check_ids() if ANY in finding.checks else finding.checks
        for fixture in (f for f in finding.fixtures if f != ANY):
            for check in checks:
                level = get_check(check).level
                subjects = ((CHECKPOINT_SUBJECT,) if level == "checkpoint"
                            else finding.subjects or (IMPL, VLLM_BACKEND))
                cells.update((fixture, subject, check) for subject in subjects)
    def order(names: tuple[str, ...], name: str) -> int:
        return names.index(name) if name in names else len(names)

    return sorted(cells, key=lambda cell: (cell[1] != IMPL, order(finding.fixtures, cell[0]),
                                           order(finding.checks, cell[2]), cell))


def chosen_cells(finding, args: argparse.Namespace) -> list[tuple[str, str, str]]:
    """The finding's cells that --arch, --check and --subject (where given) leave."""
    return [(fixture, subject, check) for fixture, subject, check
            in finding_cells(finding, _baseline())
            if (args.arch or fixture) == fixture and (args.check or check) == check
            and (args.subject or subject) == subject]


def _baseline() -> list:
    try:
        return report.read_results(BASELINE)[0]
    except (OSError, ValueError, KeyError):
        return []  # no baseline here: the finding's own entry names its cells


def cmd_bisect(args: argparse.Namespace) -> int:
    given = requested_versions(args.versions, default=())  # a malformed one: one line
    good, bad = (requested_version(v) if v else None for v in (args.good, args.bad))
    finding = None
    if args.finding:
        try:
            finding = expectations.get(args.finding)
        except KeyError:
            return fail(f"no finding {args.finding!r} in conformance/expectations/findings.toml "
                        "(`conformance known` lists them)")
        ends = given or FULL_VERSIONS  # the releases given, else the matrix's range
        good, bad = good or ends[0], bad or ends[-1]
        cells = chosen_cells(finding, args)
        if not cells and not (args.arch and args.check):
            return fail(f"{finding.id} names no cell" + (" matching --arch/--check/--subject"
                        if args.arch or args.check or args.subject else "")
                        + ": give --arch and --check")
        arch, subject, check = cells[0] if cells else (args.arch, args.subject, args.check)
    elif not (args.arch and args.check and good and bad):
        return fail("bisect needs --arch, --check, --good and --bad (or --finding ID)")
    else:
        arch, subject, check = args.arch, args.subject, args.check
    level = get_check(check).level
    subject = subject or (CHECKPOINT_SUBJECT if level == "checkpoint" else IMPL)
    releases = list(given) or bisect.released_versions(good, bad)
    if not releases or releases[0] != good or releases[-1] != bad:
        return fail(f"{good} and {bad} must both be released versions, oldest first "
                    f"(found {releases[:1]} .. {releases[-1:]})")
    try:  # parsed once, and planted in each probe's cell it reaches
        fault = Fault.parse(args.fault) if args.fault else None
    except ValueError as error:
        return fail(str(error))
    under_test = environments.parse(args.vllm or DEFAULT_VLLM)
    # the ends (every release, where given) installable before any probe, or one line each
    upfront = versions.resolve_up_front(given or (good, bad), [under_test.key],
                                        csv(args.allow_unmet))
    if upfront.problems:
        return [fail(line) for line in upfront.problems][-1]
    what = f"finding {finding.id} on " if finding else ""
    others = f"; {len(cells) - 1} other cell(s) show it: --arch/--check/--subject choose" \
        if finding and len(cells) > 1 else ""
    print(f"bisecting {what}{arch} / {subject} / {check} over {len(releases)} releases "
          f"{releases[0]} .. {releases[-1]}" + (f" (planted fault {fault})" if fault else "")
          + others)
    cell = bisect.probe_cell(arch, subject, check, fault, args.vllm)

    def probe(version: str) -> Verdict:
        # a release between the ends that cannot be installed is no answer either way
        if problems := versions.resolve_up_front([version], [under_test.key],
                                                 csv(args.allow_unmet),
                                                 log=lambda _: None).problems:
            raise ValueError(f"{problems[0]}; leave it out with --versions")
        return cell(version)

    try:
        result = (bisect.bisect_finding(releases, probe, finding) if finding
                  else bisect.bisect(releases, probe))
    except ValueError as error:
        return fail(str(error), 1)
    before, after = result.verdicts[result.last], result.verdicts[result.first]
    if finding:
        change = "appears" if result.appears else "disappears"
        print(f"{finding.id} {change} in transformers {result.first} (last release "
              f"{'without' if result.appears else 'with'} it: {result.last})")
    else:
        print(f"first bad release: transformers {result.first} (last good {result.last})")
    for version, verdict in ((result.last, before), (result.first, after)):
        print(f"  {version}: {bisect.describe(verdict)}: {bisect.evidence(verdict)[:300]}")
    return 0
