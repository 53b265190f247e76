"""The processing checks' standalone reproducer: a linted module embedded from source, whose
HF oracle is the `hf` subject's own expansion (one function, `subjects.hf_expansion`), its
count check included. No model runs; the exported script's functions run in this process on
tiny fixtures (tests/test_check.py runs a whole script from a clean folder)."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.checks.model import reproducer
from conformance.inputs.cases import Case
from conformance.inputs.media import Media
from conformance.results import processing_reproducer, standalone
from conformance.results.evidence import Difference, Evidence
from conformance.results.verdict import Verdict
from conformance.subjects import hf_expansion
from conformance.subjects.hf import HfSubject
from fixtures.build import build_fixture
from fixtures.registry import get_recipe

ROOT = Path(__file__).resolve().parent.parent
EMBEDDED = (processing_reproducer, hf_expansion, reproducer)
# What a script may import: vLLM, transformers, torch, numpy, Pillow and the standard library
THIRD_PARTY = {"vllm", "transformers", "torch", "numpy", "PIL"}
# name, items: an image prompt whose items are cut into contiguous runs (LLaVA), cut by the
# processor's own counts (Qwen2-VL), an audio one, and a non-contiguous span (Aya Vision)
CASES = {
    "llava": (Media("image", 30, 40, seed=0), Media("image", 20, 20, seed=1)),
    "qwen2_vl": (Media("image", 56, 28, seed=0), Media("image", 28, 28, seed=1)),
    "audioflamingo3": (Media("audio", samples=1600, seed=0),),
    "aya_vision": (Media("image", 30, 40, seed=0),),
}


def relative(module) -> str:
    return str(Path(module.__file__).relative_to(ROOT))


def test_the_embedded_modules_are_ruff_clean_and_not_excluded():
    paths = [relative(m) for m in EMBEDDED]
    for path in paths:
        assert "noqa" not in (ROOT / path).read_text(), f"{path} silences a rule"
    listed = subprocess.run([sys.executable, "-m", "ruff", "check", "--show-files", "."],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert all(path in listed for path in paths), "ruff's configuration excludes one of them"
    run = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *paths],
                         cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize("module", EMBEDDED, ids=lambda m: m.__name__)
def test_an_embedded_module_imports_only_what_a_script_has(module):
    """Outside the standard library, only vLLM and what it brings; this project's imports
    only of the pieces the script pastes beside it (the embedding drops those lines)."""
    tree = ast.parse(Path(module.__file__).read_text())
    project = {"conformance.inputs.media", "conformance.subjects.hf_expansion"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            assert name in project or top in THIRD_PARTY or top in sys.stdlib_module_names, \
                f"{module.__name__} imports {name}"
            if name in project:  # pasted: it may only be a top-level import, dropped whole
                assert node in tree.body, f"{module.__name__} imports {name} in a function"


def exported(name: str, tmp_path: Path, monkeypatch) -> tuple[object, Case]:
    """The placeholders cell's standalone script for `name`'s case (HF oracle), loaded as a
    module with the fixture as its argument."""
    path = str(build_fixture(name))
    media = CASES[name]
    case = Case(name, media[0].modality, ("a ", *[" b "] * (len(media) - 1), " c"), media)
    cell = Verdict(name, "5.17.0", "placeholders", "fail", subject="vllm-backend",
                   data={"case": case.to_json()}, evidence=Evidence(
                       (Difference.of("vs hf: item 0 differs", reference="hf"),)))
    target = standalone.write_standalone(tmp_path / "repro", cell, get_recipe(name), path, path)
    assert target is not None
    source = target.read_text()
    assert "conformance" not in source.replace("`conformance check`", "")
    assert "ORACLE = 'hf'" in source
    spec = importlib.util.spec_from_file_location(f"reproduce_{name}", target)
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, script)  # its dataclass looks itself up
    monkeypatch.setattr(sys, "argv", [str(target), path])
    spec.loader.exec_module(script)
    return script, case


@pytest.mark.vllm
def test_an_exported_script_names_nothing_it_does_not_define(tmp_path, monkeypatch):
    """Every name the pasted pieces use is defined in the script (undefined-name lint)."""
    script, _ = exported("llava", tmp_path, monkeypatch)
    run = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated",
                          "--select", "F821,F822,F823", script.__file__],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.vllm
@pytest.mark.parametrize("name", sorted(CASES))
def test_an_exported_script_expands_as_the_hf_subject_does(name, tmp_path, monkeypatch):
    script, case = exported(name, tmp_path, monkeypatch)
    ids, placeholders = script.hf_processed(script.REPLAY)
    want = HfSubject(str(build_fixture(name)), get_recipe(name)).process(case)
    assert ids == list(want.prompt_ids)
    assert placeholders == [(p.offset, p.length, list(p.embed_positions))
                            for p in want.placeholders[case.modality]]
    assert len(placeholders) == len(case.media)


def test_counts_that_do_not_add_up_to_the_marked_positions_are_an_error():
    assert hf_expansion.split_marked([3, 4, 5, 8, 9], [3, 2]) == [[3, 4, 5], [8, 9]]
    assert hf_expansion.split_marked([3, 4, 5, 8, 9], None) == [[3, 4, 5], [8, 9]]
    with pytest.raises(ValueError, match=r"^processor marks 5 positions but counts \[3, 3\]$"):
        hf_expansion.split_marked([3, 4, 5, 8, 9], [3, 3])


def test_counts_of_the_embedded_positions_cut_the_marked_ones_too():
    """transformers 5.25 counts only the tokens receiving features (Aya Vision, InternVL,
    Idefics3): each item then spans its embedded tokens, its own opening tokens and as many
    closing ones as the last item has; counts adding up to neither meaning stay an error."""
    start, tile, patch, end = 1, 2, 9, 3
    # Aya Vision-like: an image with a tile and the global view, then one with the global
    # view alone, text between them (unmarked positions 6 and 7)
    marked = [0, 1, 2, 3, 4, 5, 8, 9, 10, 11]
    ids = [start, tile, patch, tile, patch, end, start, tile, patch, end]
    assert hf_expansion.split_marked(marked, [2, 1], ids, patch) == \
        [[0, 1, 2, 3, 4, 5], [8, 9, 10, 11]]
    assert hf_expansion.split_marked(marked, [6, 4], ids, patch) == \
        [[0, 1, 2, 3, 4, 5], [8, 9, 10, 11]]  # the whole meaning, as before
    # Idefics3-like: the token opening an item also separates its crops, and two items touch
    fake, glob = 4, 5
    ids = [fake, patch, fake, glob, patch, fake, fake, glob, patch, fake]
    assert hf_expansion.split_marked(list(range(10)), [2, 1], ids, patch) == \
        [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9]]
    for counts in ([2, 2], [1, 1], [4]):
        with pytest.raises(ValueError, match=rf"^processor marks 10 positions but counts "
                                             rf"\[{', '.join(map(str, counts))}\]$"):
            hf_expansion.split_marked(list(range(10)), counts, ids, patch)
    with pytest.raises(ValueError, match=r"^processor marks 10 positions but counts \[2, 1\]$"):
        hf_expansion.split_marked(list(range(10)), [2, 1])  # no ids: the whole meaning only


def counting_one_more(monkeypatch) -> None:
    """Every HF processor loaded from now counts one image token more per item than its
    prompt marks: the prompt holds too few placeholder tokens for its counts."""
    from transformers import AutoProcessor

    load = AutoProcessor.from_pretrained

    def loaded(*args, **kwargs):
        processor = load(*args, **kwargs)
        count = processor._get_num_multimodal_tokens
        processor._get_num_multimodal_tokens = lambda **sizes: {
            "num_image_tokens": [n + 1 for n in count(**sizes)["num_image_tokens"]]}
        return processor

    monkeypatch.setattr(AutoProcessor, "from_pretrained", loaded)


@pytest.mark.vllm
def test_the_count_check_fires_in_the_script_and_in_the_hf_subject(tmp_path, monkeypatch,
                                                                    capsys):
    script, case = exported("qwen2_vl", tmp_path, monkeypatch)
    lengths = [length for _, length, _ in script.hf_processed(script.REPLAY)[1]]  # contiguous
    counting_one_more(monkeypatch)
    message = f"processor marks {sum(lengths)} positions but counts {[n + 1 for n in lengths]}"
    with pytest.raises(ValueError, match=re.escape(message)):
        script.hf_processed(script.REPLAY)
    with pytest.raises(ValueError, match=re.escape(message)):
        HfSubject(str(build_fixture("qwen2_vl")), get_recipe("qwen2_vl")).process(case)
    assert script.main(script.REPLAY, "usage") == 2  # the oracle fails: it cannot compare
    assert f"the oracle (hf) cannot process it: ValueError: {message}" in capsys.readouterr().out
