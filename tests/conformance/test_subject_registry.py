"""Subjects have a declared interface: the registry names each one once (the ground floor's
names), every registered class satisfies `Subject`, checks ask declared capabilities instead of
probing attributes, and a fault reaches only the subject it targets. A throwaway third subject
(one class and one registry line) runs through `make_subject` and a check."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from unittest import mock

import pytest

from conformance.core.subjects import IMPL, ORACLES, SUBJECTS, VLLM_BACKEND
from conformance.run.cell import run_cell
from conformance.run.plan import Cell, key_here
from conformance.subjects import REGISTRY, make_subject, plants_faults
from conformance.subjects import faults as faults_module
from conformance.subjects.context import fixture_path
from conformance.subjects.faults import TARGETS, Fault
from conformance.subjects.impl import ImplSubject
from conformance.subjects.protocol import CAPABILITIES, Subject
from fixtures.registry import get_recipe

ROOT = Path(__file__).resolve().parents[2]
# where subjects are used: the checks and the context they receive
USERS = [*sorted((ROOT / "conformance" / "checks").rglob("*.py")),
         ROOT / "conformance" / "subjects" / "context.py"]
SUBJECT_NAMES = {"subject", "party", "oracle"}


def test_the_registry_names_the_ground_floor_subjects_and_oracles():
    assert tuple(REGISTRY) == SUBJECTS + ORACLES


@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_registered_subject_satisfies_the_protocol(name):
    subject = make_subject(name, fixture_path("llava"), get_recipe("llava"))
    assert isinstance(subject, Subject)
    assert subject.name == name
    assert subject.capabilities <= CAPABILITIES


def probed(node: ast.AST) -> bool:
    """`subject`, `ctx.subject`, `ctx.oracles[...]`: a subject itself, not something it gives."""
    if isinstance(node, ast.Subscript):
        node = node.value
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
    return name in SUBJECT_NAMES or name == "oracles"


@pytest.mark.parametrize("path", USERS, ids=lambda p: p.name)
def test_no_check_probes_a_subject_for_what_it_offers(path):
    calls = [node for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
             and node.func.id in ("hasattr", "getattr") and node.args and probed(node.args[0])]
    assert not calls, [f"{path.name}:{c.lineno}: ask `capabilities`" for c in calls]


def test_every_fault_targets_a_registered_subject():
    assert set(TARGETS) == set(faults_module.FAULTS) | set(faults_module.MEDIA_FAULTS)
    assert set(TARGETS.values()) <= set(REGISTRY)


@pytest.mark.parametrize("fault", sorted(TARGETS))
def test_a_fault_reaches_only_the_cells_of_its_target(fault):
    assert {name for name in REGISTRY if Fault(fault).routed(name, "5.17.0")} == {TARGETS[fault]}


class EchoSubject(ImplSubject):
    """A throwaway third subject: impl's output, its prompt ids shifted by `shift`."""

    name = "echo"
    capabilities = frozenset()  # plants no fault itself: a fault targeting it wraps its cell
    shift = 0

    def __init__(self, path, recipe):
        super().__init__(path, recipe)
        self.name = "echo"

    def process(self, case, **kwargs):
        out = super().process(case, **kwargs)
        return dataclasses.replace(out, prompt_ids=tuple(i + self.shift for i in out.prompt_ids))


def test_a_new_subject_is_one_class_and_one_registry_line(monkeypatch, tmp_path):
    monkeypatch.setitem(REGISTRY, "echo", EchoSubject)
    monkeypatch.setitem(faults_module.FAULTS, "echo-shifted",
                        lambda: [mock.patch.object(EchoSubject, "shift", 1)])
    monkeypatch.setitem(TARGETS, "echo-shifted", "echo")
    assert isinstance(make_subject("echo", "unused", get_recipe("llava")), EchoSubject)
    assert not plants_faults("echo") and plants_faults(IMPL)

    def cell(subject, spec="echo-shifted"):  # through the cell runner, as every command
        fault = Fault.parse(spec) if spec else None
        return run_cell(Cell.of(key_here("llava", subject, "prompt-ids"), fault),
                        repro_dir=tmp_path)

    faulty = cell("echo")
    assert faulty.status == "fail" and "prompt ids differ" in faulty.detail, faulty
    assert cell(IMPL).status == "pass"  # the fault targets echo alone
    assert cell("echo", spec=None).status == "pass"
    assert Fault("echo-shifted").routed(VLLM_BACKEND, "5.17.0") is None
