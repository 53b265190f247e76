"""`conformance bisect`: the first transformers release where a cell goes bad."""

from __future__ import annotations

import argparse

from conformance.cli.common import csv, fail
from conformance.core.subjects import IMPL


def cmd_bisect(args: argparse.Namespace) -> int:
    from conformance.run import bisect

    versions = list(csv(args.versions)) or bisect.released_versions(args.good, args.bad)
    if not versions or versions[0] != args.good or versions[-1] != args.bad:
        return fail(f"{args.good} and {args.bad} must both be released versions "
                     f"(found {versions[:1]} .. {versions[-1:]})")
    from conformance.checks import get_check
    from conformance.run.plan import CHECKPOINT_SUBJECT

    level = get_check(args.check).level
    subject = args.subject or (CHECKPOINT_SUBJECT if level == "checkpoint" else IMPL)
    print(f"bisecting {args.arch} / {subject} / {args.check} over {len(versions)} releases "
          f"{versions[0]} .. {versions[-1]}" + (f" (planted fault {args.fault})"
                                                  if args.fault else ""))
    probe = bisect.probe_cell(args.arch, subject, args.check, args.fault, args.vllm)
    try:
        result = bisect.bisect(versions, probe)
    except ValueError as error:
        return fail(str(error), 1)
    good, bad = result.verdicts[result.last_good], result.verdicts[result.first_bad]
    print(f"first bad release: transformers {result.first_bad} (last good {result.last_good})")
    print(f"  {result.last_good}: {good.status} {' '.join(good.detail.split())[:300]}")
    print(f"  {result.first_bad}: {bad.status} {' '.join(bad.detail.split())[:500]}")
    return 0
