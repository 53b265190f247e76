"""`conformance check` on checkpoints that differ from our recipes the way real ones do, and its
standalone reproducers.

The checkpoints are built here from a recipe's parts, changed: a short context (the text model's
max_position_embeddings 512, below the harness's old fixed 4096), a Llama-style tokenizer
(SentencePiece-like BPE with byte fallback, `LlamaTokenizer`) instead of our byte-level one, a
processor resized away from its recipe's sizes, and an architecture without a native vLLM model.
Each must get verdicts, never a false "cannot be served".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.cli import main
from conformance.results.verdict import Verdict

ROOT = Path(__file__).resolve().parent.parent
SUITE_CHECKS = "processing,prompt-ids,placeholders,errors"


def short_context_llava(out: Path) -> Path:
    """A LLaVA whose text model takes 512 positions: vLLM derives max_model_len 512."""
    from fixtures.build import write_checkpoint
    from fixtures.registry import get_recipe

    recipe = get_recipe("llava")
    parts = recipe.make("tiny")
    parts.config.text_config.max_position_embeddings = 512
    write_checkpoint(recipe, parts, out)
    return out


def llama_tokenizer(specials: list[str]):
    """A Llama-style tokenizer: BPE over "▁"-marked words with byte fallback, as
    SentencePiece-converted checkpoints ship, loaded through `LlamaTokenizer`."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaTokenizer

    from fixtures.tokenizer import CORPUS

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    byte_pieces = [f"<0x{i:02X}>" for i in range(256)]
    trainer = trainers.BpeTrainer(vocab_size=len(specials) + 256 + 200, show_progress=False,
                                  special_tokens=specials + byte_pieces)
    tokenizer.train_from_iterator(list(CORPUS), trainer=trainer)
    model = json.loads(tokenizer.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split()) for m in model["merges"]]
    return LlamaTokenizer(vocab=model["vocab"], merges=merges, unk_token="<unk>",
                          bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                          extra_special_tokens={"image_token": "<image>"})


def llama_tokenizer_llava(out: Path) -> Path:
    from transformers import CLIPImageProcessor, LlavaProcessor

    from fixtures.build import write_checkpoint
    from fixtures.families import llava
    from fixtures.registry import get_recipe

    recipe = get_recipe("llava")
    parts = recipe.make("tiny")
    tokenizer = llama_tokenizer(["<unk>", "<s>", "</s>", "<pad>", llava.IMAGE])
    processor = llava.clip_processor(
        LlavaProcessor, CLIPImageProcessor(**llava.clip_sizes(28)), tokenizer)
    parts.config.text_config.vocab_size = len(tokenizer)
    parts.config.image_token_id = tokenizer.convert_tokens_to_ids(llava.IMAGE)
    write_checkpoint(recipe, type(parts)(config=parts.config, processor=processor), out)
    return out


def resized_qwen2_vl(out: Path) -> Path:
    """Qwen2-VL whose image processor allows 56x56 to 112x112 pixels (the recipe: 28x28 to 56x56),
    as a fine-tune setting its own min_pixels / max_pixels ships it."""
    from fixtures.build import write_checkpoint
    from fixtures.registry import get_recipe

    recipe = get_recipe("qwen2_vl")
    parts = recipe.make("tiny")
    parts.processor.image_processor.size = {"shortest_edge": 56 * 56, "longest_edge": 112 * 112}
    write_checkpoint(recipe, parts, out)
    return out


def no_native_model(out: Path) -> Path:
    """Aya Vision: vLLM 0.31.0 has no native model, so the HF processor is the oracle."""
    from fixtures.build import build_fixture

    shutil.copytree(build_fixture("aya_vision"), out)
    return out


ODD = {"short-context": short_context_llava, "llama-tokenizer": llama_tokenizer_llava,
       "processor-sizes": resized_qwen2_vl, "no-native-model": no_native_model}


@pytest.fixture(scope="session")
def odd(tmp_path_factory) -> dict[str, Path]:
    """Every checkpoint, built in a process of its own: once vLLM's backend has loaded a model
    in this one (another test of this process, whatever the order pytest-xdist gives), it has
    patched transformers' model classes, and building one here would fail."""
    folder = tmp_path_factory.mktemp("odd")
    subprocess.run([sys.executable, __file__, str(folder)], check=True, cwd=ROOT)
    return {name: folder / name for name in ODD}


def test_the_checkpoints_differ_from_their_recipes_as_intended(odd):
    def read(name: str, file: str) -> dict:
        return json.loads((odd[name] / file).read_text())

    assert read("short-context", "config.json")["text_config"]["max_position_embeddings"] == 512
    assert read("llama-tokenizer", "tokenizer_config.json")["tokenizer_class"] == "LlamaTokenizer"
    assert "▁" in (odd["llama-tokenizer"] / "tokenizer.json").read_text()
    size = read("processor-sizes", "processor_config.json")["image_processor"]["size"]
    assert size == {"shortest_edge": 56 * 56, "longest_edge": 112 * 112}
    assert read("no-native-model", "config.json")["architectures"] == [
        "AyaVisionForConditionalGeneration"]


def check(capfd, monkeypatch, path: Path, out: Path, *args: str) -> tuple[int, str, list]:
    # `check` makes its settings this process's: tests/conftest.py restores them after the test
    code = main(["check", str(path), "--output", str(out), *args])
    captured = capfd.readouterr()
    cells = json.loads((out / "results.json").read_text())["cells"] if code in (0, 1) else []
    return code, captured.out + captured.err, cells


@pytest.mark.vllm
@pytest.mark.e2e
@pytest.mark.parametrize("name", ["llama-tokenizer", "processor-sizes", "no-native-model"])
def test_checkpoints_unlike_our_recipes_get_verdicts(name, odd, tmp_path, capfd, monkeypatch):
    code, text, cells = check(capfd, monkeypatch, odd[name], tmp_path, "--checks",
                              SUITE_CHECKS)
    assert code in (0, 1), text[-3000:]
    assert "cannot be served" not in text and "refuses" not in text
    assert {c["check"] for c in cells} == set(SUITE_CHECKS.split(","))
    # every cell ran: a verdict about the backend, not an error of the harness
    assert all(c["status"] in ("pass", "xfail", "fail") for c in cells), [
        (c["check"], c["subject"], c["status"], Verdict.from_dict(c).detail[:200]) for c in cells]
    assert "check         subject       verdict" in text


@pytest.mark.model
def test_a_short_context_checkpoint_runs_every_check_model_ones_included(odd, tmp_path, capfd,
                                                                        monkeypatch):
    """The issue's checkpoint: vLLM serves it with max_model_len 512, and so does the harness
    (its engines at min(1024, 512)); the bare assert is a known limitation, not a fix-it item."""
    code, text, cells = check(capfd, monkeypatch, odd["short-context"], tmp_path)
    assert code == 0, text[-3000:]
    assert "max model length 512 (derived by vLLM)" in text
    status = {(c["check"], c["subject"]): c for c in cells}
    for model_check in ("model", "encoder", "generate"):
        assert status[(model_check, "vllm-backend")]["status"] == "pass"
    assert status[("mrope", "vllm-backend")]["status"] == "n/a"
    assert status[("errors", "vllm-backend")]["finding"] == "offsets-bare-assert"
    assert "known backend limitation: offsets-bare-assert" in text
    assert "What to fix" not in text
    # the engines' C++ notes and loading bars went to the log, not between the verdicts
    assert "NUMA" not in text and "it/s]" not in text, text
    assert "Loading weights" in (tmp_path / "check.log").read_text()


@pytest.mark.vllm
@pytest.mark.e2e
def test_a_standalone_reproducer_runs_from_a_clean_folder(tmp_path, capfd, monkeypatch,
                                                          tmp_path_factory):
    """gemma3-offsets-newlines (transformers >= 5.15): the exported script replays the failing
    prompt through native vLLM and the backend with nothing of this project, and exits 1."""
    import transformers

    from fixtures.build import build_fixture
    from impl.version import parse_version

    if parse_version(transformers.__version__) < parse_version("5.15"):
        pytest.skip("gemma3-offsets-newlines is an Offsets-path finding (transformers >= 5.15)")
    fixture = build_fixture("gemma3")
    exported = tmp_path / "exported"
    code, text, cells = check(capfd, monkeypatch, fixture, tmp_path / "report", "--checks",
                              "processing", "--export-repro", str(exported))
    assert code == 0, text[-3000:]
    (cell,) = cells
    assert cell["status"] == "xfail" and cell["finding"] == "gemma3-offsets-newlines"
    (script,) = exported.glob("*.py")
    # results.json records it relative to the report's folder (tests/test_report_paths.py)
    assert cell["data"]["reproducer"] == f"../exported/{script.name}" and str(script) in text
    source = script.read_text()
    assert "conformance" not in source.replace("`conformance check`", "")
    assert str(fixture) not in source and str(ROOT) not in source
    assert not any(line.startswith(("import /", "sys.path")) or "'/" in line or '"/' in line
                   for line in source.splitlines())

    clean = tmp_path_factory.mktemp("clean")  # outside the repository
    shutil.copy(script, clean / "reproduce.py")
    env = {"HOME": os.environ.get("HOME", str(clean)), "PATH": "/usr/bin:/bin",
           "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    run = subprocess.run([sys.executable, "reproduce.py", str(fixture)], cwd=clean, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
    assert "FAILS: prompt ids differ" in run.stdout
    usage = subprocess.run([sys.executable, "reproduce.py"], cwd=clean, env=env,
                           capture_output=True, text=True, timeout=600)
    assert usage.returncode == 2 and "Usage: python this_script.py CHECKPOINT" in usage.stderr


def test_check_transformers_reruns_itself_under_the_overlay(monkeypatch, tmp_path):
    """--transformers V: the same check again, in a process whose transformers is V."""
    from conformance.run import versions
    from conformance.run.versions import Overlay

    overlay = Overlay("5.12.1", ("transformers==5.12.1",), tmp_path / "overlay")
    monkeypatch.setattr(versions, "ensure_overlay", lambda version, log=print: overlay)
    calls = []

    def execvpe(file, argv, env):
        calls.append((argv, env))
        raise SystemExit(0)

    monkeypatch.setattr(os, "execvpe", execvpe)
    with pytest.raises(SystemExit):
        main(["check", "some/model", "--transformers", "5.12.1", "--checks", "processing",
              "--output", str(tmp_path / "out")])
    ((argv, env),) = calls
    assert argv[:4] == [sys.executable, "-m", "conformance", "check"]
    assert "--transformers" not in argv and argv[4] == "some/model"
    assert argv[argv.index("--checks") + 1] == "processing"
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path / "overlay")
    assert env["CONFORMANCE_TRANSFORMERS"] == "5.12.1"


def test_check_rejects_an_unknown_check(tmp_path, capfd):
    assert main(["check", str(tmp_path), "--checks", "prompt-ids,nonsense"]) == 2
    assert "unknown check(s) nonsense" in capfd.readouterr().err


def raising_in(filename: str, error: Exception):
    """A function whose frame is in `filename` (where vLLM's code would be) and raises."""
    namespace: dict = {}
    exec(compile("def f(error):\n    raise error\n", filename, "exec"), namespace)
    return lambda *args, **kwargs: namespace["f"](error)


@pytest.mark.parametrize("backend_ok, default_ok, native, from_backend, expected", [
    (True, True, True, False, "a harness setting"),
    (False, True, True, False, "the backend's limitation"),
    (False, False, True, False, "the checkpoint is at fault"),
    (False, False, False, True, "the backend's limitation"),
    (False, False, False, False, "the checkpoint is at fault"),
])
def test_a_refusal_says_whose_problem_it_is(monkeypatch, backend_ok, default_ok, native,
                                            from_backend, expected):
    """vLLM is asked again with its defaults: the backend alone refusing is its limitation (the
    checks go on and report it), vLLM refusing altogether the checkpoint's, and vLLM's defaults
    passing where the harness's settings fail a harness setting."""
    from dataclasses import replace

    from conformance.inputs.checkpoints import CheckpointError
    from conformance.subjects import serving, vllm
    from fixtures.registry import get_recipe

    recipe = replace(get_recipe("llava"), native_in_vllm=native)
    refusal = ValueError("max_model_len (4096) is greater than the derived max_model_len")
    where = "/v/model_executor/models/transformers/multimodal.py" if from_backend else "/v/x.py"

    def processor_from(config):
        ok = backend_ok if config == ("default", vllm.BACKEND) else default_ok
        return object() if ok else raising_in(where, refusal)()

    monkeypatch.setattr(vllm, "default_model_config", lambda path, impl=None: (
        "default", impl) if impl else type("Config", (), {"model_impl": "auto"})())
    monkeypatch.setattr(vllm, "processor_from", processor_from)
    harness = RuntimeError("refused under the harness's settings")
    try:
        message = serving.diagnose("ckpt", recipe, harness)
    except CheckpointError as error:
        message = str(error)
        assert expected != "the backend's limitation"
    else:
        assert expected == "the backend's limitation" and "The checks run" in message
    assert expected in message
    quoted = harness if expected == "a harness setting" else refusal
    assert str(quoted) in message


@pytest.mark.parametrize("name", ["llava", "pixtral", "gemma3", "qwen2_5_vl", "aya_vision"])
def test_a_checkpoint_takes_the_findings_of_the_fixture_of_its_architecture(name):
    """Hub checkpoints (and the fixtures that mirror them) map to their fixture, LLaVA's two
    layouts (CLIP or Pixtral tower) apart: its known findings then apply to them."""
    from conformance.inputs.checkpoints import matching_fixture
    from fixtures.registry import get_recipe

    recipe = get_recipe(name)
    parts = recipe.make("tiny")
    assert matching_fixture(recipe.architecture, parts.config, parts.processor) is recipe
    assert matching_fixture("NoSuchModelForConditionalGeneration", parts.config,
                            parts.processor) is None


if __name__ == "__main__":  # the `odd` fixture's builder
    for name, build in ODD.items():
        build(Path(sys.argv[1]) / name)
