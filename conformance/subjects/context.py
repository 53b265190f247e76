"""What a case-level check receives: one fixture's subject and its oracles, built once.

Subjects and oracles are kept per process (their processors are built once per checkpoint and
option set), and oracle outputs are memoised per checkpoint: every check asks them about the
same generated cases.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from conformance.core.subjects import HF, VLLM_NATIVE
from conformance.subjects import make_subject
from conformance.subjects.faults import PLANTED
from conformance.subjects.isolation import processor_defaults_fresh
from conformance.subjects.protocol import PLANTS_FAULTS, VIDEO
from fixtures.variants import build_fixture, get_recipe  # either takes a variant's name too
from impl.types import ProcessedPrompt
from impl.version import placeholder_strategy

if TYPE_CHECKING:
    from conformance.subjects.faults import Fault


def _or_none(compute: Any) -> Any:
    try:
        return compute()
    except Exception:  # the oracle rejects the case: nothing to compare, not the subject's
        return None


class OracleFailed(RuntimeError):
    """An oracle could not process a valid case: the case says nothing about the subject."""


def oracle_reason(error: BaseException) -> str:
    """An oracle failure without its case, so equal causes count together."""
    return str(error).split(" on ", 1)[0][:200]


def in_form(party: Any, case: Any, form: str | None = None, *, fresh: bool = True,
            **kwargs: Any) -> ProcessedPrompt:
    """`case` processed by `party` with the case's processor options in `form` (default: the
    case's own `option_form`; `conformance.inputs.forms`); `kwargs` go to `party.process` as
    they are (`cache=`).

    Processors make the options they count tokens with their class's defaults
    (`conformance.subjects.isolation`): the case's model-flat runs, earlier in the same case,
    would hand this one the options as defaults, and a processor that ignores them in this
    form would pass. So it starts from the defaults a deployment without them has (`fresh`;
    not for a later request of the same deployment, which finds what the earlier ones left).
    """
    form = case.option_form if form is None else form
    if not fresh:
        return party.process(case, form=form, **kwargs)
    with processor_defaults_fresh():
        return party.process(case, form=form, **kwargs)


@dataclass
class Context:
    """One fixture on the installed transformers version: the subject and its oracles."""

    fixture: str
    path: str
    recipe: Any
    subject: Any
    oracles: dict[str, Any]  # "vllm-native" (absent without a native model) and "hf"
    _memo: dict = field(default_factory=dict)
    # why an oracle could not process a case, by reason (without the case): a suite that never
    # exercised a sub-property (an oracle rejecting every case) says why
    oracle_failures: Counter = field(default_factory=Counter)

    def subject_output(self, case: Any) -> ProcessedPrompt:
        """The subject's output for `case`, computed once per worker and checkpoint: the
        checks' searches draw the same cases (one seed), and a subject's processing is a
        function of the case (the `cache` check proves it; the processor's class defaults are
        restored between cases). Recomputed whenever a fault is planted. A failure is
        remembered and raised again."""
        return self._subject("subject", case, lambda: self.subject.process(case))

    def subject_form_output(self, case: Any) -> ProcessedPrompt:
        """`subject_output` with the case's processor options in its form (`in_form`),
        computed once the same way."""
        return self._subject("subject in form", case, lambda: in_form(self.subject, case))

    def _subject(self, kind: str, case: Any, compute: Callable[[], ProcessedPrompt]
                 ) -> ProcessedPrompt:
        if PLANTED or (PLANTS_FAULTS in self.subject.capabilities and self.subject.fault):
            return compute()
        key = (kind, self.subject.name, case)
        if key not in self._memo:
            try:
                self._memo[key] = compute()
            except Exception as error:
                self._memo[key] = error
        found = self._memo[key]
        if isinstance(found, Exception):
            raise found
        return found

    def oracle_output(self, name: str, case: Any) -> ProcessedPrompt:
        key = (name, case)
        if key not in self._memo:
            try:
                self._memo[key] = self.oracles[name].process(case)
            except Exception as error:
                failed = OracleFailed(f"{name}: {type(error).__name__}: {error}")
                self.oracle_failures[oracle_reason(failed)] += 1
                raise failed from error
        return self._memo[key]

    def oracle_derived(self, name: str, case: Any, compute: Any) -> Any:
        """`compute()`, something an oracle gives for `case` beyond its output (native vLLM's
        outputs through its own processor cache), once per worker and checkpoint: both
        subjects' cells compare with the same. Its failure is remembered as None."""
        if PLANTED:
            return _or_none(compute)
        key = ("derived", name, case)
        if key not in self._memo:
            self._memo[key] = _or_none(compute)
        return self._memo[key]

    def oracle_form_output(self, name: str, case: Any) -> ProcessedPrompt | None:
        """The oracle's output for `case` with its options in its form (`in_form`), once per
        worker and checkpoint; None where the oracle rejects it (nothing to compare: its
        model-level output may still be)."""
        return self.oracle_derived(f"{name} in form", case,
                                   lambda: in_form(self.oracles[name], case))

    @property
    def video(self) -> bool:
        """Whether the suite draws video items: where the subject takes them (vLLM's backend,
        where the vLLM under test serves the fixture's videos; impl, where the release profile
        it follows does: from vLLM 0.32.0 on)."""
        return VIDEO in self.subject.capabilities

    @property
    def reference(self) -> str:
        """The oracle placeholders are compared with: native vLLM, else the HF processor."""
        return VLLM_NATIVE if VLLM_NATIVE in self.oracles else HF

    @functools.cached_property
    def strategy(self) -> str:
        import transformers

        return placeholder_strategy(transformers.__version__)


@functools.lru_cache(maxsize=32)
def fixture_path(name: str) -> str:
    return str(build_fixture(name))


_ORACLES: dict[tuple[str, str], dict] = {}
_SUBJECTS: dict[tuple[str, str, str, Fault | None], Any] = {}
_MEMOS: dict[tuple[str, str], dict] = {}


def oracles_for(path: str, recipe: Any) -> dict:
    """Shared by every subject and check on the same checkpoint."""
    key = (path, recipe.name)
    if key not in _ORACLES:
        names = (VLLM_NATIVE, HF) if recipe.native_in_vllm else (HF,)
        _ORACLES[key] = {name: make_subject(name, path, recipe) for name in names}
    return _ORACLES[key]


def subject_for(path: str, recipe: Any, name: str, fault: Fault | None = None) -> Any:
    """One per checkpoint, subject and fault in a process: its processor is built once."""
    key = (path, recipe.name, name, fault)
    if key not in _SUBJECTS:
        _SUBJECTS[key] = make_subject(name, path, recipe, fault)
    return _SUBJECTS[key]


def make_context(fixture: str, subject: str, fault: Fault | None = None, *,
                 path: str | None = None, recipe: Any = None) -> Context:
    """For a fixture by name, or for any checkpoint folder with a recipe made for it."""
    if recipe is None:
        recipe = get_recipe(fixture)
    path = path or fixture_path(fixture)
    for other in [k for k in _MEMOS if k != (path, recipe.name)]:
        del _MEMOS[other]  # a worker runs a fixture's cells together: keep one's outputs
    memo = _MEMOS.setdefault((path, recipe.name), {})
    return Context(fixture, path, recipe, subject_for(path, recipe, subject, fault),
                   oracles_for(path, recipe), memo)
