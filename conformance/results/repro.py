"""Standalone reproducer scripts for failing cases, and the code they replay."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from conformance.inputs.cases import Case

TEMPLATE = '''#!/usr/bin/env python3
"""Reproducer: check `{check}` failed for subject `{subject}` on fixture `{fixture}`.

transformers: {version}
inputs:       {inputs}
expected:     the subject agrees with the oracle ({statement})
actual:       {evidence}

Run from the repository root with the project's environment:
    .venv/bin/python {path}
Exit status 1: the failure reproduces; 0: it no longer does.
"""
import sys

CASE = {case!r}
CHECK = {check!r}
SUBJECT = {subject!r}
FAULT = {fault!r}
TRANSFORMERS = {version!r}

if __name__ == "__main__":
    sys.path.insert(0, {root!r})
    from conformance.results.repro import replay

    sys.exit(replay(CHECK, SUBJECT, FAULT, CASE, TRANSFORMERS))
'''


def write_reproducer(out_dir: Path, *, check: str, subject: str, fault: str | None,
                     case: Case, version: str, evidence: str) -> Path:
    from conformance.checks import get_check
    from conformance.paths import ROOT

    out_dir.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(f"{check}{subject}{fault}{case.to_json()}{version}".encode())
    who = f"{subject}+{fault}" if fault else subject
    name = f"{case.fixture}-{who}-{check}-{digest.hexdigest()[:8]}"
    path = out_dir / f"{name}.py"
    path.write_text(TEMPLATE.format(
        check=check, subject=subject, fixture=case.fixture, version=version,
        inputs=case.describe(), statement=get_check(check).statement,
        evidence=evidence.replace('"""', "'''"), path=path, case=case.to_json(), fault=fault,
        root=str(ROOT),
    ))
    path.chmod(0o755)
    return path


def replay(check: str, subject: str, fault: str | None, case_json: str, version: str) -> int:
    import transformers

    from conformance.checks import get_check
    from conformance.subjects.context import make_context

    case = Case.from_json(case_json)
    if transformers.__version__ != version:
        print(f"note: recorded on transformers {version}, running {transformers.__version__} "
              f"(use `conformance exec --transformers {version} -- python {sys.argv[0]}`)")
    ctx = make_context(case.fixture, subject, fault)
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
