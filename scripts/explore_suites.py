"""Run the property suites for fixtures x subjects x checks, one line per cell (a dev aid).

    .venv/bin/python scripts/explore_suites.py llava,gemma3 vllm-backend,impl prompt-ids,cache
"""

import sys
import tempfile
import time
from pathlib import Path

from conformance.run.plan import key_here
from conformance.run.suite import run_suite


def main(fixtures: str, subjects: str, checks: str) -> None:
    repro = Path(tempfile.mkdtemp(prefix="repro-"))
    for fixture in fixtures.split(","):
        for subject in subjects.split(","):
            for check in checks.split(","):
                started = time.time()
                r = run_suite(key_here(fixture, subject, check), repro_dir=repro)
                print(f"RESULT {fixture} {subject} {check}: {r.status} "
                      f"({r.data.get('examples', 0)} examples, {time.time() - started:.1f} s, "
                      f"oracle failures {r.data.get('oracle_failures', 0)}) {r.detail[:700]} | "
                      f"{r.data.get('oracle_note', '')[:300]}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
