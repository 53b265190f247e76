"""Bisect every regression of a gated run; print a Markdown summary (transformers-upgrade.yml).

    .venv/bin/python scripts/bisect_regressions.py reports/runs/merged [--good 5.17.0]
        [--baseline-vllm 0.31.0]

Each regression is bisected over transformers on the vLLM of its cell (kept fixed).
"""

import argparse
import subprocess
import sys
from pathlib import Path

from conformance.cli import BASELINE
from conformance.results import gate, report


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("results")
    parser.add_argument("--baseline", default=str(BASELINE))
    parser.add_argument("--good", default="5.17.0", help="a release the baseline passes on")
    parser.add_argument("--baseline-vllm", help="the baseline's vLLM, when the run tested "
                        "another (as `conformance gate --baseline-vllm`)")
    args = parser.parse_args()
    baseline, _ = report.read_results(Path(args.baseline))
    current, _ = report.read_results(Path(args.results))
    result = gate.compare(baseline, current, baseline_version=args.good,
                          baseline_vllm=args.baseline_vllm)
    print("## First bad transformers release per regression\n")
    for _, now in result.regressions:
        key = now.key
        out = subprocess.run(
            [sys.executable, "-m", "conformance", "bisect", "--arch", key.fixture, "--check",
             key.check, "--subject", key.subject, "--good", args.good, "--bad", key.version,
             "--vllm", key.vllm],
            capture_output=True, text=True)
        lines = [line for line in out.stdout.splitlines() if line.startswith(("first", "  "))]
        print(f"- **{key.label()}**: " + ("; ".join(lines[-3:]) or out.stderr.strip()[-300:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
