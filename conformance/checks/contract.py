"""What a check is: its declaration (`Check`) and what it returns (`Outcome`).

A check module defines one `CHECK = Check(...)`; `conformance.checks` discovers them. Two
levels:

- `case`: `run(ctx, case) -> Outcome` for one generated case; a suite cell drives it over
  hypothesis-generated cases for one fixture and subject (`conformance.run.suite`).
- `checkpoint`: `run(recipe, path, *, device, dtype, subject_media) -> Outcome` once per
  fixture on fixed inputs, vLLM's backend against its references (`compared_with`: native
  vLLM, the HF processor, the HF model); `subject_media`, when given, changes the subject's
  media only: a planted fault.

Every check names the planted fault (`conformance.subjects.faults`) and the fixture on which
that fault makes it fail: the proof that it can fail, run by tests/conformance/test_faults.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from conformance.core.subjects import IMPL

# Applied to the subject's items only by a checkpoint-level check (a planted media fault)
MediaHook = Callable[[list], list]


@dataclass
class Outcome:
    ok: bool
    evidence: str = ""  # the first difference, stated precisely; empty when ok
    measured: dict = field(default_factory=dict)
    more: tuple[str, ...] = ()  # the other differences, of other sub-properties
    exercised: frozenset[str] = frozenset()  # the check's sub-properties this case ran
    # the processor options under which a checkpoint-level difference was found (a finding
    # bound to options explains it only under them), by the difference
    options: dict[str, tuple[tuple[str, object], ...]] = field(default_factory=dict)
    # the input variant each difference was found on, where the check names one (the errors
    # check's unplaceable variant, an option form): what a reproducer replays, by difference
    inputs: dict[str, str] = field(default_factory=dict)

    @property
    def differences(self) -> tuple[str, ...]:
        """Every difference found, each judged on its own (a known one hides no other)."""
        return ((self.evidence,) if not self.ok else ()) + self.more

    @classmethod
    def judged(cls, differences: list[str], exercised: set[str],
               inputs: dict[str, str] | None = None) -> Outcome:
        """The outcome of sub-properties each judged on its own."""
        return cls(not differences, differences[0] if differences else "",
                   more=tuple(differences[1:]), exercised=frozenset(exercised),
                   inputs=inputs or {})

    @classmethod
    def of(cls, evidence: str | None, measured: dict | None = None) -> Outcome:
        """ok when there is no evidence of a difference."""
        return cls(evidence is None, evidence or "", measured or {})


PASS = Outcome(True)

# The model checks' references (`checks/model/references.py`)
MODEL_REFERENCES = "native vLLM (where vLLM has a model of its own) and the HF model, three-way"


# Where a checkpoint-level check function lists every difference it found, besides its
# one-line evidence: each is judged on its own, so a known one hides no other
PROBLEMS = "problems"
# The model checks' references by name, and the data key listing each one's relation to the
# subject (checks/model/references.py): here, where reading a cell's data needs no model code
NATIVE_REF, HF_REF = "native", "hf"
REFERENCES = "references"


def returning_outcome(check: Callable[..., tuple[str | None, dict]]) -> Callable[..., Outcome]:
    """A checkpoint-level `run` from a function returning (evidence or None, measured data);
    the data's `PROBLEMS`, when listed, are the differences one by one."""

    def run(*args: object, **kwargs: object) -> Outcome:
        evidence, measured = check(*args, **kwargs)
        if problems := list(measured.pop(PROBLEMS, None) or ()):
            outcome = Outcome.judged(problems, set())
            outcome.measured = measured
            return outcome
        return Outcome.of(evidence, measured)

    return run


class NotApplicable(Exception):  # noqa: N818 - a verdict, not an error
    """The check does not apply to this checkpoint (e.g. M-RoPE on a model without it)."""


@dataclass(frozen=True)
class Proof:
    """A planted fault that makes the check fail on `fixture` (with `evidence` in it)."""

    fault: str
    fixture: str
    evidence: str
    subject: str = IMPL  # a backend fault proves a sub-property only vllm-backend claims
    sub_property: str = ""  # the one it proves, where the subject claims it only on some paths


@dataclass(frozen=True)
class Check:
    id: str
    statement: str  # what holds when it passes, one sentence
    hint: str  # where a contributor looks first when it fails
    level: Literal["case", "checkpoint"]
    run: Callable[..., Outcome]
    proof: Proof
    # proofs of sub-properties the main proof's subject does not claim (the backend's steps)
    more_proofs: tuple[Proof, ...] = ()
    # what the check compares its subject with, as docs/checks.md's table says it
    compared_with: str = "native vLLM; the HF processor"
    loads_model: bool = False  # loads models: runs on vLLM's window + 1 by default
    # The backend fault that must turn every `vllm-backend` cell of this check that carries a
    # known finding into `fail` (tests/conformance/test_fault_matrix.py): no finding may
    # swallow it. One of the check's proofs, so it is also shown failing a clean cell.
    matrix_fault: str = ""
    # the sub-properties a suite cell (its context given) must have exercised to pass
    claims: Callable[..., tuple[str, ...]] = lambda ctx: ()

    @property
    def exhaustive(self) -> bool:
        """A checkpoint-level check runs its fixed inputs in full, so a known finding it no
        longer shows is stale (xpass); a suite draws cases, and not drawing the failing one
        proves nothing."""
        return self.level == "checkpoint"

