"""`conformance check` says whose problem a failure is, and keeps third-party output out of its
verdict lines.

Four broken copies of the llava fixture, each as a contributor might bring one: config.json cut
in half, the weights file removed, one projector tensor of another shape than the config makes,
the tokenizer file removed. None is the backend's problem: `check` says so in one line naming the
cause, lists nothing under "What to fix", and exits 2 (exit 1 is kept for the backend's failures).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from conformance.cli.check import OWNER, exit_status, third_party_output, verdict_text
from conformance.results.verdict import Verdict
from conformance.run import attribution
from conformance.run.attribution import CHECKPOINT, TRANSFORMERS, VLLM, Problem, attribute

ROOT = Path(__file__).resolve().parent.parent
PROJECTOR = "multi_modal_projector.linear_1.weight"


def truncated_config(folder: Path) -> None:
    text = (folder / "config.json").read_text()
    (folder / "config.json").write_text(text[: len(text) // 2])


def no_weights(folder: Path) -> None:
    (folder / "model.safetensors").unlink()


def reshaped_projector(folder: Path) -> None:
    """The projector's first weight, [64, 32], stored as [32, 64]: the same numbers, laid out
    as no config of this checkpoint makes them."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(folder / "model.safetensors")
    rows, columns = tensors[PROJECTOR].shape
    tensors[PROJECTOR] = tensors[PROJECTOR].reshape(columns, rows).contiguous()
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})


def no_tokenizer(folder: Path) -> None:
    (folder / "tokenizer.json").unlink()


BROKEN = {"truncated-config": truncated_config, "no-weights": no_weights,
          "reshaped-projector": reshaped_projector, "no-tokenizer": no_tokenizer}


@pytest.fixture(scope="session")
def broken(tmp_path_factory) -> dict[str, Path]:
    """The copies, built in a process of their own (the engine tier's test process may hold a
    loaded backend, and building the fixture then fails: it patches transformers' classes)."""
    folder = tmp_path_factory.mktemp("broken")
    subprocess.run([sys.executable, __file__, str(folder)], check=True, cwd=ROOT)
    return {name: folder / name for name in BROKEN}


# (the copy, what the one line says)
REFUSED = [
    ("truncated-config", "config.json is not readable JSON: JSONDecodeError"),
    ("no-tokenizer", "a tokenizer file is missing: TokenizersBackend (tokenizer_config.json) "
                     "reads tokenizer.json or tokenizer.model; the folder lacks tokenizer.json, "
                     "tokenizer.model"),
]
ATTRIBUTED = [
    ("no-weights", "no weights file in the folder"),
    ("reshaped-projector", "its weights do not fit its config (model.safetensors; transformers' "
                           f"loading report): model.{PROJECTOR} is [32, 64] in the checkpoint, "
                           "[64, 32] by the config"),
]
NOISE = ("Triton", "FutureWarning", "NUMA", "it/s]", "Loading", "cpp_extension")


@pytest.mark.vllm
@pytest.mark.parametrize("name, cause", REFUSED, ids=[c[0] for c in REFUSED])
def test_a_checkpoint_transformers_cannot_read_is_refused_in_one_line(name, cause, tmp_path,
                                                                      capfd):
    """Nothing can run without the config and the processor: one line, exit 2, before any
    check (so no engine: the copy is made here)."""
    from conformance.cli import main
    from fixtures.build import build_fixture

    copy = tmp_path / name
    shutil.copytree(build_fixture("llava"), copy)
    BROKEN[name](copy)
    code = main(["check", str(copy), "--output", str(tmp_path / "out")])
    captured = capfd.readouterr()
    assert code == 2, captured
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith(f"error: {CHECKPOINT}, not the backend's: {cause}")
    assert not (tmp_path / "out").exists()  # refused: nothing written, not even the log


@pytest.mark.vllm
@pytest.mark.e2e
@pytest.mark.parametrize("name, cause", ATTRIBUTED, ids=[c[0] for c in ATTRIBUTED])
def test_a_checkpoints_failed_model_cells_are_its_own_problem_not_the_backends(
        name, cause, broken, tmp_path):
    """The command as a contributor runs it (a process of its own: its descriptors are the
    terminal's): the processor's checks run and pass, the model's fail, and those failures
    are the checkpoint's, on one line with their cause; exit 2; no third-party output."""
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "conformance", "check", str(broken[name]),
                          "--checks", "processing,model", "--output", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    said = run.stdout + run.stderr
    assert run.returncode == 2, said[-3000:]
    assert f"{CHECKPOINT}, not the backend's: {cause}" in said
    assert "What to fix" not in said and "hint:" not in said
    assert not [word for word in NOISE if word in said], said
    cells = {c["check"]: c for c in json.loads((out / "results.json").read_text())["cells"]}
    assert cells["processing"]["status"] == "pass"  # the processor is sound: its checks run
    model = cells["model"]
    assert model["status"] == "error" and model["data"][OWNER]["owner"] == CHECKPOINT
    assert "reproducer" not in model["data"]  # nothing for a vLLM or transformers issue
    assert "Loading weights" in (out / "check.log").read_text() or name == "no-weights"


def verdict(status: str = "error", data: dict | None = None, check: str = "model") -> Verdict:
    return Verdict("llava", "5.17.0", check, status, "RuntimeError: boom", data=data or {})


WEIGHTS = Problem(CHECKPOINT, "weights", "no weights file in the folder")
BOOM = "RuntimeError: start (0) + length (64) exceeds dimension size (32)."


@pytest.mark.parametrize("status, data, loads_model, owner", [
    ("error", {}, True, CHECKPOINT),  # transformers cannot load the weights
    ("error", {}, False, None),  # a check that loads no model: not about weights
    ("pass", {}, True, None),  # only failures have an owner
    ("fail", {"backend": {"error": BOOM}, "references": {"native": f"error: {BOOM}"}}, True,
     CHECKPOINT),  # the weights problem comes first
])
def test_a_weights_problem_owns_the_failed_cells_of_the_checks_that_load_the_model(
        status, data, loads_model, owner):
    problem = attribute(verdict(status, data), WEIGHTS, loads_model)
    assert (problem and problem.owner) == owner


def test_transformers_failing_otherwise_owns_only_the_cells_that_fail_with_its_error():
    """Not surely the checkpoint's (transformers lacks the class, memory ran out): a cell where
    the backend fails its own way is still the backend's."""
    error = attribution.same_words("AttributeError: module 'transformers' has no attribute 'X'")
    other = Problem(TRANSFORMERS, "model", "transformers cannot load the model", error=error)
    same = Verdict("llava", "5.17.0", "model", "error", error + " (more)")
    own = Verdict("llava", "5.17.0", "model", "fail", "greedy token differs: native 7 vs 9")
    assert attribute(same, other, loads_model=True) == other
    assert attribute(own, other, loads_model=True) is None


@pytest.mark.parametrize("references, owner, says", [
    ({"native": f"error: {BOOM}", "hf": f"error: {BOOM}"}, TRANSFORMERS,
     "native vLLM and the HF model fail the same way"),
    ({"hf": f"error: {BOOM}"}, TRANSFORMERS, "the HF model fails the same way"),
    ({"native": f"error: {BOOM}", "backend vs hf": "differs"}, VLLM,
     "native vLLM fails the same way (the HF model does not)"),
    ({"native": "error: ValueError: something else"}, None, ""),  # another failure: the backend's
    ({}, None, ""),  # the references ran: the backend's
])
def test_a_cell_whose_references_fail_the_same_way_is_not_the_backends(references, owner,
                                                                        says):
    """Weights transformers loads: a model check's failure is compared with its references'."""
    data = {"backend": {"error": BOOM}, "references": references}
    problem = attribute(verdict("fail", data), None, loads_model=True)
    assert (problem and problem.owner) == owner
    if problem:
        assert problem.line() == f"{owner}, not the backend's: {says}: {BOOM}"


def test_the_exit_status_says_whether_any_failure_is_the_backends():
    owned = verdict(data={OWNER: asdict(WEIGHTS)})
    assert exit_status([verdict("pass"), verdict("xfail")]) == 0
    assert exit_status([verdict("pass"), owned]) == 2
    assert exit_status([owned, verdict("fail", check="prompt-ids")]) == 1
    text = verdict_text([owned, verdict("fail", check="prompt-ids")])
    attributed, to_fix = text.split("What to fix (new failures):")
    assert f"model (vllm-backend): {WEIGHTS.line()}" in attributed
    assert "prompt-ids (vllm-backend), fail" in to_fix and "model (" not in to_fix


def test_the_probe_names_the_broken_file(tmp_path):
    """Without transformers' wording in the way: the file, and why it does not load."""
    (tmp_path / "config.json").write_text('{"architectures": ["LlavaForConditionalGeneration"],')
    problem = attribution.probe_files(tmp_path)
    assert problem.owner == CHECKPOINT and problem.part == "config"
    assert problem.cause.startswith("config.json is not readable JSON: JSONDecodeError: ")
    (tmp_path / "tokenizer_config.json").write_text('{"tokenizer_class": "LlamaTokenizer"}')
    assert attribution.missing_tokenizer_files(tmp_path) == (
        "a tokenizer file is missing: LlamaTokenizer (tokenizer_config.json) reads "
        "tokenizer.json or tokenizer.model; the folder lacks tokenizer.json, tokenizer.model")
    (tmp_path / "tokenizer.model").write_bytes(b"")
    assert attribution.missing_tokenizer_files(tmp_path) is None  # the slow route is there


def test_third_party_output_goes_to_the_log(tmp_path, capfd):
    """C++ writes to the descriptors, Python warnings and prints of other code: all in the
    log; what `check` says, on the terminal."""
    import os

    log = tmp_path / "out" / "check.log"
    log.parent.mkdir()  # as the session makes it
    with third_party_output(log) as console:
        os.write(2, b"[W utils.cpp:68] Warning: NUMA binding\n")
        os.write(1, b"Loading weights: 100%\n")
        print("dispatcher.py:138: FutureWarning: `reduce_op` is deprecated", file=sys.stderr)
        print("Triton is installed, but not usable")
        print("     pass  vllm-backend / processing 0.1 s", file=console)
    print("after")
    captured = capfd.readouterr()
    assert captured.out == "     pass  vllm-backend / processing 0.1 s\nafter\n"
    assert captured.err == ""
    kept = log.read_text()
    for noise in ("NUMA binding", "Loading weights", "FutureWarning", "Triton"):
        assert noise in kept
    with third_party_output(tmp_path / "elsewhere" / "check.log"):
        print("Triton is installed, but not usable")
    assert not (tmp_path / "elsewhere").exists() and capfd.readouterr() == ("", "")


if __name__ == "__main__":  # the `broken` fixture's builder
    from fixtures.build import build_fixture

    fixture = build_fixture("llava")
    for name, breaks in BROKEN.items():
        copy = Path(sys.argv[1]) / name
        shutil.copytree(fixture, copy)
        breaks(copy)
