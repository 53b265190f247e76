"""`conformance gate`, `baseline`, `merge` and `known`: reading and comparing results."""

from __future__ import annotations

import argparse
from pathlib import Path

from conformance.results.verdict import BAD, Verdict


def cmd_gate(args: argparse.Namespace) -> int:
    from conformance.results import gate, report

    baseline, _ = report.read_results(Path(args.baseline))
    current, _ = report.read_results(Path(args.results))
    result = gate.compare(baseline, current, compare_missing=args.show_missing,
                          baseline_version=args.baseline_version,
                          baseline_vllm=args.baseline_vllm, accept=frozenset(args.accept))
    if args.baseline_vllm is not None:
        from conformance.core.vllms import sort_key
        from conformance.results.releases import compare_releases, render_lines

        # the baseline's release against each release of the run: findings fixed and new
        pinned = [v for v in baseline if v.vllm == args.baseline_vllm]
        if args.baseline_version is not None:  # as the gate compares: that version's cells
            pinned = [Verdict(**{**v.__dict__, "version": version})
                      for version in {c.version for c in current} for v in pinned
                      if v.version == args.baseline_version]
        for label in sorted({v.vllm for v in current} - {args.baseline_vllm}, key=sort_key):
            print("\n".join(render_lines(compare_releases(pinned + current,
                                                           args.baseline_vllm, label))))
    print(gate.render(result))  # its last line is the gate's verdict
    return 0 if result.ok else 1


def cmd_baseline(args: argparse.Namespace) -> int:
    from conformance.results import report
    from conformance.results.portable import portable_cells, portable_meta

    verdicts, meta = report.read_results(Path(args.results))
    out = Path(args.output)
    # the run folder names the run; its results.json names nothing
    source = Path(args.results).resolve()
    source = source.parent if source.name == "results.json" else source
    # the baseline is committed: no absolute path of this machine goes into it
    report.write_results(out, portable_cells(report.latest_per_cell(verdicts)),
                         portable_meta({**meta, "baseline_of": str(source)}))
    print(f"wrote {out} from {args.results} ({len(verdicts)} cells)")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from conformance.results import report

    verdicts: list[Verdict] = []
    metas = []
    for path in args.results:
        got, meta = report.read_results(Path(path))
        verdicts += got
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
    from conformance.expectations.document import DOCUMENT, findings_markdown

    text = findings_markdown()
    if not args.write:
        print(text, end="")
        return 0
    DOCUMENT.parent.mkdir(parents=True, exist_ok=True)
    DOCUMENT.write_text(text)
    print(f"wrote {DOCUMENT}")
    return 0


def cmd_checks(args: argparse.Namespace) -> int:
    from conformance.checks import checks_markdown

    print(checks_markdown(), end="")
    return 0
