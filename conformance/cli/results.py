"""`conformance gate`, `baseline`, `merge`, `known`, `findings` and `checks`: reading and comparing
results, and the catalogues they are judged by."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING

from conformance import expectations
from conformance.checks import ORDER, checks_markdown, registry
from conformance.cli.common import fail
from conformance.expectations.document import DOCUMENT, findings_markdown
from conformance.results import gate, gate_report, report
from conformance.results.portable import (
    folder_absolute,
    paths_folder,
    portable_cells,
    portable_meta,
)
from conformance.results.verdict import BAD, Verdict
from impl.version import bounds

if TYPE_CHECKING:
    from conformance.expectations import Finding


def cmd_gate(args: argparse.Namespace) -> int:

    baseline, _ = report.read_results(Path(args.baseline))
    current, _ = report.read_results(Path(args.results))
    result = gate.compare(baseline, current, compare_missing=args.show_missing,
                          baseline_version=args.baseline_version,
                          baseline_vllm=args.baseline_vllm, accept=frozenset(args.accept))
    # the run's vLLMs compared with another of the baseline's: findings fixed and new
    diffs = gate.release_changes(baseline, current, result.pairs)
    reason = (gate.nothing_compared(baseline, current, result.pairs)
              if result.status == "nothing-compared" else "")
    if args.json:
        print(json.dumps({**gate_report.as_json(result, diffs), "reason": reason}, indent=2))
    else:
        print("\n".join(gate_report.release_lines(diffs, args.details)
                        + [(gate_report.render if args.details else gate_report.summary)(result)]))
    if reason:  # no verdict: never a pass
        return fail(f"gate compared no cell with {args.baseline}: {reason}")
    return result.exit_code


def cmd_baseline(args: argparse.Namespace) -> int:

    verdicts, meta = report.read_results(Path(args.results))
    out = Path(args.output)
    # the run folder names the run; its results.json names nothing
    source = Path(args.results).resolve()
    source = source.parent if source.name == "results.json" else source
    # the baseline is committed: no absolute path of this machine goes into it
    # a cell's log is a file of one run's folder, never committed; its other paths are made
    # the root's
    within = paths_folder(Path(args.results), meta)
    cells = [dataclasses.replace(folder_absolute(v, within), log=None)
             for v in report.latest_per_cell(verdicts)]
    report.write_results(out, portable_cells(cells),
                         portable_meta({**meta, "baseline_of": str(source)}))
    print(f"wrote {out} from {args.results} ({len(verdicts)} cells)")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:

    verdicts: list[Verdict] = []
    metas = []
    for path in args.results:
        got, meta = report.read_results(Path(path))
        # each shard's paths made absolute, to be written relative to the merged folder
        verdicts += [folder_absolute(v, paths_folder(Path(path), meta)) for v in got]
        metas.append(meta)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"merged_from": list(args.results),
            "seconds": sum(m.get("seconds") or 0 for m in metas)}
    if seeds := sorted({m["seed"] for m in metas if "seed" in m}):  # the shards' suites'
        meta.update({"seed": seeds[0]} if len(seeds) == 1 else {"seeds": seeds})
    report.write_reports(out, verdicts, meta)
    merged = report.latest_per_cell(verdicts)
    print(f"merged {len(args.results)} results into {out}/ ({len(merged)} cells)")
    return 1 if any(v.status in BAD for v in merged) else 0


def cmd_known(args: argparse.Namespace) -> int:

    text = findings_markdown()
    if not args.write:
        print(text, end="")
        return 0
    DOCUMENT.parent.mkdir(parents=True, exist_ok=True)
    DOCUMENT.write_text(text)
    print(f"wrote {DOCUMENT}")
    return 0


def cmd_checks(args: argparse.Namespace) -> int:

    if not args.json:
        print(checks_markdown(), end="")
        return 0
    rows = [{"id": check.id, "level": check.level, "statement": check.statement,
             "compared_with": check.compared_with, "hint": check.hint,
             "loads_model": check.loads_model,
             "proofs": [{"fault": proof.fault, "fixture": proof.fixture}
                        for proof in (check.proof, *check.more_proofs)]}
            for check in registry().values()]
    print(json.dumps(rows, indent=2))
    return 0


def finding_row(finding: Finding) -> dict:
    """A finding's listing: what `conformance findings` prints, and its `--json`."""
    def axis(spec: str) -> dict:
        low, high = bounds(spec)
        return {"spec": spec, "min": low, "max": high, "text": finding.describe_versions(spec)}

    return {"id": finding.id, "title": finding.title, "fixtures": list(finding.fixtures),
            "checks": list(finding.checks), "subjects": list(finding.subjects),
            "transformers": axis(finding.versions), "vllm": axis(finding.vllm),
            "open": dict(finding.open), "upstream": list(finding.upstream),
            "side": finding.side}


def checks_text(checks: list[str]) -> str:
    """A finding's checks, short: most of the catalogue reads as what it leaves out."""

    left_out = [c for c in ORDER if c not in checks]
    if set(checks) <= set(ORDER) and len(left_out) <= 3:
        return "all" + (" but " + ",".join(left_out) if left_out else "")
    return ",".join(checks)


def findings_table(rows: list[dict]) -> list[str]:
    """One line per finding: id, transformers and vLLM bounds, upstream links, checks (the
    widest column last, so that it pads no other)."""
    columns = [("id", lambda r: r["id"]),
               ("transformers", lambda r: r["transformers"]["text"]),
               ("vLLM", lambda r: r["vllm"]["text"]),
               ("upstream", lambda r: " ".join(r["upstream"]) or "none filed"),
               ("checks", lambda r: checks_text(r["checks"]))]
    cells = [[name for name, _ in columns]] + [[get(r) for _, get in columns] for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns) - 1)]
    return ["  ".join([*(text.ljust(w) for text, w in zip(line, widths, strict=False)),
                       line[-1]]).rstrip() for line in cells]


def cmd_findings(args: argparse.Namespace) -> int:

    rows = [finding_row(finding) for finding in expectations.load()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print("\n".join(findings_table(rows)))
    print(f"{len(rows)} findings (conformance/expectations/findings.toml; each in full: "
          "docs/findings.md, `conformance known`)")
    return 0
