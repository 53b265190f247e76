"""The process that runs cells on one transformers version and streams their verdicts.

Started by the matrix runner with the version's overlay on PYTHONPATH. Each verdict is printed
on its own line behind MARK, so vLLM's and transformers' own output can share stdout.
"""

from __future__ import annotations

import argparse
import sys

MARK = "@@verdict@@ "


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.worker")
    parser.add_argument("--fixtures", required=True, help="comma-separated fixture names")
    parser.add_argument("--checks", required=True, help="comma-separated smoke checks")
    args = parser.parse_args(argv)

    from conformance.smoke import run_cells

    for verdict in run_cells(args.fixtures.split(","), args.checks.split(",")):
        # Progress bars leave lines open: start ours on a fresh one.
        sys.stdout.write("\n" + MARK + verdict.to_json() + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
