"""Reproducer scripts for failing suite cases, and the code they replay.

A script holds the case and the cell, never a path: it imports the harness from the environment
that runs it (the project installed, as a checkout's .venv has it), so it runs wherever the run
folder is copied to.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from conformance.checks import get_check
from conformance.inputs.cases import Case
from conformance.subjects.context import make_context
from conformance.subjects.faults import Fault

TEMPLATE = '''#!/usr/bin/env python3
"""Reproducer: check `{check}` failed for subject `{subject}` on fixture `{fixture}`.

transformers: {version}
inputs:       {inputs}
expected:     the subject agrees with the oracle ({statement})
actual:       {evidence}

It replays the cell through the harness (vllm-mm-conformance): run it with the environment the
harness is installed in, from anywhere, e.g. in a checkout:
    .venv/bin/python PATH/TO/{name}
Exit status 1: the failure reproduces; 0: it no longer does; 2: the harness is not importable.
"""
import sys

CASE = {case!r}
CHECK = {check!r}
SUBJECT = {subject!r}
FAULT = {fault!r}
TRANSFORMERS = {version!r}

if __name__ == "__main__":
    try:
        from conformance.results.repro import replay
    except ImportError as error:
        print(f"{{sys.argv[0]}}: the harness (vllm-mm-conformance) is not importable here "
              f"({{error}}): run this script with its environment's python (a checkout's "
              ".venv/bin/python), or install it (pip install -e CHECKOUT)", file=sys.stderr)
        sys.exit(2)
    sys.exit(replay(CHECK, SUBJECT, FAULT, CASE, TRANSFORMERS))
'''


def write_reproducer(out_dir: Path, *, check: str, subject: str, fault: str | None,
                     case: Case, version: str, evidence: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(f"{check}{subject}{fault}{case.to_json()}{version}".encode())
    who = f"{subject}+{fault}" if fault else subject
    name = f"{case.fixture}-{who}-{check}-{digest.hexdigest()[:8]}"
    path = out_dir / f"{name}.py"
    path.write_text(TEMPLATE.format(
        check=check, subject=subject, fixture=case.fixture, version=version,
        inputs=case.describe(), statement=get_check(check).statement,
        evidence=evidence.replace('"""', "'''"), name=path.name, case=case.to_json(),
        fault=fault,
    ))
    path.chmod(0o755)
    return path


def replay(check: str, subject: str, fault: str | None, case_json: str, version: str) -> int:
    import transformers

    case = Case.from_json(case_json)
    if transformers.__version__ != version:
        print(f"note: recorded on transformers {version}, running {transformers.__version__} "
              f"(use `conformance exec --transformers {version} -- python {sys.argv[0]}`)")
    # planted as the cell planted it: from its version on, by impl (the subject that plants)
    planted = Fault.parse(fault).on(transformers.__version__) if fault else None
    ctx = make_context(case.fixture, subject, planted)
    print(f"case: {case.describe()}")
    try:
        outcome = get_check(check).run(ctx, case)
    except Exception as error:  # the subject crashed on the case: that is the failure
        import traceback

        traceback.print_exc()
        message = "".join(traceback.format_exception_only(type(error), error)).strip()
        print(f"{check}: FAILS: raised {message}")
        return 1
    if outcome.ok:
        print(f"{check}: passes now")
        return 0
    print(f"{check}: FAILS: {outcome.evidence}")
    return 1
