"""Mutation score of the harness on vLLM 0.31.0's own Transformers backend.

Each mutant is a one-line bug a refactor of the backend or a transformers change could cause,
planted alone into a *private copy* of the installed `vllm` package, never into the environment
itself: uv builds environments from hard links into its cache, shared by every environment on
the machine, so writing into an installed file in place would change all of them. The copy is a
real copy (new inodes) under `.mutation/vllm-pkg/`, put first on the workers' PYTHONPATH (the
matrix runner keeps a PYTHONPATH it is given behind a version's overlay), and a mutated file is
replaced by a new inode, never written through.

For every mutant the matrix runs, with every check and the `vllm-backend` subject (impl is not
vLLM code), on the fixtures and transformers versions that exercise its step, and each cell is
compared with the same cell of an unmutated run of the copy:

- killed, precise: some cell went from pass / xfail to `fail` with a comparison's evidence;
- killed, not precise: only an `error`, `crash`, `timeout`, or a `fail` whose evidence is an
  exception the subject raised (the harness noticed that something broke, not what);
- masked: a cell went from pass to `xfail`, that is, a known finding's evidence matched;
- survived: no cell got worse.

The score is precise kills / the mutants that are not equivalent (issue #13's target: >= 0.9),
the usual mutation score: an equivalent mutant (its `equivalent` says how it was measured)
changes nothing the backend does on any architecture it serves, so no check can kill it, and
counting it would measure the list of mutants, not the harness. Precise kills / every mutant is
reported beside it (`score_all_mutants`).

    .venv/bin/python benchmarks/mutation.py [--only ID,ID] [--list] [--json OUT]
    .venv/bin/python benchmarks/run.py --only mutation     # writes reports/bench.json
    .venv/bin/python benchmarks/mutation.py --only ID,ID --merge reports/bench.json

`--merge` adds the chosen mutants' outcomes to the stored entry (replacing theirs, keeping every
other mutant's) and recomputes the score over all of them; each run that contributed is listed
in the entry's `runs`.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from conformance.core.baseline import shown_evidence

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".mutation"  # ignored by git: the private copy and the runs
PRIVATE = WORK / "vllm-pkg"  # holds the copied `vllm` package; first on the workers' path
RUNS = WORK / "runs"  # one folder per run (results.json) and its time (NAME.seconds)
BACKEND_DIR = Path("vllm/model_executor/models/transformers")
LEGACY, OFFSETS = "5.12.1", "5.17.0"  # one version per placeholder strategy
CELL_TIMEOUT_S = 300  # a mutant that makes hypothesis shrink for longer is a timeout
BAD = {"fail", "error", "crash", "timeout", "xpass"}
GOOD = {"pass", "xfail"}


@dataclass(frozen=True)
class Mutant:
    id: str
    step: str  # the backend step it breaks
    original: str  # exact text of one line of `file` (it must occur on exactly one line)
    replacement: str  # what replaces `original` on that line
    why: str  # how a refactor or a transformers change could cause it
    fixtures: tuple[str, ...]  # the fixtures that exercise the step
    versions: tuple[str, ...] = (OFFSETS,)
    file: str = "multimodal.py"  # in vllm/model_executor/models/transformers/
    before: str = ""  # text of the line above, where `original` alone is not unique
    equivalent: str = ""  # why no input can tell it apart on the versions it runs on, if so
    # The exception that is this mutant's whole effect, as the failing cell words it with the
    # input it met (a crash on a request the backend must serve): a kill whose evidence names
    # it is precise, the harness said what broke and where. Empty for every other mutant.
    raises: str = ""


MUTANTS: tuple[Mutant, ...] = (
    # --- dummy inputs and profiling ------------------------------------------------------------
    Mutant("profile-image-tokens-key", "profiling: get_mm_max_tokens_per_item (image)",
           'image_tokens = mm_tokens["num_image_tokens"][0]',
           'image_tokens = mm_tokens["num_image_patches"][0]',
           "both counts come from `_get_num_multimodal_tokens`; a rename or reorder of its keys "
           "makes the budget count rows of pixel data (1 per llava image) instead of tokens",
           ("llava",)),
    Mutant("profile-image-tokens-key-qwen2-5-vl", "profiling: get_mm_max_tokens_per_item (image)",
           'image_tokens = mm_tokens["num_image_tokens"][0]',
           'image_tokens = mm_tokens["num_image_patches"][0]',
           "the same key confusion as profile-image-tokens-key, on a model whose budget is "
           "already a known finding (backend-image-budget-from-huge-probe): rows are 4x the "
           "tokens after Qwen2.5-VL's 2x2 merge, so the budget of the 10000x10000 probe becomes "
           "4 patches instead of 1 token",
           ("qwen2_5_vl",)),
    Mutant("one-item-limit", "profiling: items per prompt (get_supported_mm_limits)",
           "return dict.fromkeys(self._get_supported_modalities())",
           "return dict.fromkeys(self._get_supported_modalities(), 1)",
           "'no limit' (None) replaced by a default of one item per modality, as many native "
           "models declare ({'image': 1}): multi-image prompts are refused, and profiling "
           "reserves for one item",
           ("llava",)),
    Mutant("dummy-options-dropped", "dummy inputs: the deployment's dummy options (image)",
           'overrides=mm_options.get("image"),',
           "overrides=None,",
           "the dummy options of limit_mm_per_prompt={'image': {'width': 64, 'height': 64}} "
           "lost in a refactor of get_dummy_mm_data (an argument left out, its default None): "
           "profiling runs on the 10000x10000 image whatever the deployment asked for",
           ("llava",)),
    Mutant("dummy-text-gemma3-boi", "dummy inputs: dummy text (image)",
           "image_token = processor.boi_token",
           "image_token = processor.image_token",
           "a cleanup of the Gemma3 special case; the Offsets path processes every item with "
           "this dummy text, so it reaches real requests, not only profiling",
           ("gemma3",),
           equivalent="measured equivalent on 5.17.0: Gemma3Processor sets image_token to the "
                      "tokenizer's boi_token (the soft token is tokenizer.image_token)"),
    # --- Legacy placeholders (transformers < 5.15) ---------------------------------------------
    Mutant("legacy-special-tokens", "Legacy: HF processor call on the decoded prompt",
           '"add_special_tokens": False,',
           '"add_special_tokens": True,',
           "the decoded prompt already holds BOS; restoring the processor's default adds it twice",
           ("llava",), (LEGACY,)),
    Mutant("legacy-is-embed-all", "Legacy: is_embed of a located image",
           "is_embed=torch.isin(tokens, image_token_ids),",
           "is_embed=None,",
           "assuming the whole marked span holds embeddings (true for llava), where "
           "mm_token_type_ids also marks the tokens structuring an image (Idefics3's tile "
           "markers; Gemma3 and Qwen2-VL mark the embedding tokens only, so they cannot show it)",
           ("idefics3",), (LEGACY,)),
    Mutant("legacy-image-split-sizes", "Legacy: image placeholders split per item",
           'split_sizes = mm_tokens_per_modality["num_image_tokens"]',
           'split_sizes = sorted(mm_tokens_per_modality["num_image_tokens"])',
           "the per-image counts normalised (sorted) by a refactor: the marked positions are "
           "cut in the wrong sizes once images differ",
           ("qwen2_vl",), (LEGACY,)),
    Mutant("legacy-audio-run-length", "Legacy: audio token runs",
           "lengths = torch.where(transitions == -1)[0] - offsets",
           "lengths = torch.where(transitions == -1)[0] - offsets - 1",
           "an off-by-one reading the run's end index as inclusive",
           ("qwen2_audio",), (LEGACY,)),
    Mutant("legacy-audio-count-max", "counts: num_audio_tokens (Legacy)",
           'processed_data["num_audio_tokens"] = lengths',
           'processed_data["num_audio_tokens"] = lengths.max().repeat(len(lengths))',
           "counts taken as the batch's padded length (processors pad every audio to the "
           "longest)",
           ("qwen2_audio",), (LEGACY,)),
    Mutant("legacy-image-patches-key", "counts: num_image_patches (Legacy)",
           'mm_tokens_per_modality["num_image_patches"]',
           'mm_tokens_per_modality["num_image_tokens"]',
           "the two counts confused: equal for llava, 4x apart for Qwen2-VL (2x2 merge)",
           ("qwen2_vl",), (LEGACY,)),
    Mutant("legacy-hash-order", "hashing (Legacy: hashes returned with the items)",
           "mm_hashes=mm_hashes,",
           "mm_hashes={m: h[::-1] for m, h in mm_hashes.items()},",
           "hashes listed in another order than the items (e.g. after sorting them), so the "
           "encoder cache files an item under its neighbour's hash",
           ("llava",), (LEGACY,)),
    Mutant("legacy-request-options-dropped", "Legacy: a request's own processor options",
           "hf_processor_mm_kwargs = inputs.hf_processor_mm_kwargs",
           "hf_processor_mm_kwargs = {}",
           "the request's mm_processor_kwargs (hf_processor_mm_kwargs) dropped, as the backend "
           "already does where it counts tokens (`get_merged_mm_kwargs({})`): a request's "
           "max_pixels never reaches the processor",
           ("qwen2_vl",), (LEGACY,)),
    # --- Offsets placeholders (transformers >= 5.15) -------------------------------------------
    Mutant("offsets-embed-token-last", "replacements: embedding token of a replacement",
           "return int(replacement_ids.mode().values)",
           "return int(replacement_ids[-1])",
           "assuming a replacement ends in the token that holds embeddings (true for llava and "
           "the Qwen-VL family, whose replacements are pads only; not where an end marker "
           "closes it, as Idefics3's <fake_token_around_image>)",
           ("idefics3",)),
    Mutant("offsets-is-embed-all", "replacements: is_embed",
           "PromptUpdateDetails.select_token_id(",
           "(lambda seq, _token: PromptUpdateDetails.from_seq(seq))(",
           "the replacement given without selecting its embedding token: every position of it "
           "is marked as an embedding (only visible where a replacement holds markers: "
           "Idefics3's tile markers; Qwen-VL replacements are pads only)",
           ("idefics3",)),
    Mutant("offsets-replacement-special-tokens", "Offsets: replacement text encoded",
           'cached_encode(tokenizer, entry["replacement"], add_special_tokens=False)',
           'cached_encode(tokenizer, entry["replacement"], add_special_tokens=True)',
           "the tokenizer's default restored: each replacement gains the BOS token",
           ("llava",)),
    Mutant("offsets-request-options-dropped", "Offsets: a request's own processor options",
           "mm_items, hf_kwargs",
           "mm_items, {}",
           "the request's mm_processor_kwargs (hf_kwargs) dropped from the HF call, as the "
           "backend already does where it counts rows (`get_merged_mm_kwargs({})`): a "
           "request's max_pixels never reaches the processor, while the cache still keys the "
           "items by it",
           ("qwen2_vl",)),
    Mutant("offsets-reversed", "Offsets: replacements in the order of the offsets",
           "for entry in offsets[0]:",
           "for entry in reversed(offsets[0]):",
           "spans walked back to front, the idiom for editing a string in place so that earlier "
           "offsets stay valid: each item gets its neighbour's replacement once items differ",
           ("qwen2_vl",)),
    Mutant("offsets-one-replacement", "replacements: one per item",
           "replacement=replacements.__getitem__,",
           "replacement=lambda index: replacements[0],",
           "assuming every item of a modality expands alike (true for fixed-size llava)",
           ("qwen2_vl",)),
    Mutant("offsets-missing-offsets-silent", "Offsets: processor without offsets",
           "if has_mm_data:",
           "if has_mm_data and offsets is not None:",
           "a missing key read as 'nothing to place': items go through without placeholders",
           ("llava",), before="if offsets is None or len(offsets) == 0 or len(offsets[0]) == 0:"),
    Mutant("offsets-patches-per-token", "counts: num_image_patches from image_grid_thw",
           "num_patches = grid.prod(-1)",
           "num_patches = grid.prod(-1) // 4",
           "rows confused with tokens (Qwen2-VL merges 2x2 patches into one token)",
           ("qwen2_vl",)),
    Mutant("offsets-patches-key", "counts: num_image_patches asked of the processor",
           'return list(mm_tokens["num_image_patches"])',
           'return list(mm_tokens["num_image_tokens"])',
           "the two counts `_get_num_multimodal_tokens` reports confused (a swapped height and "
           "width would not show: tile counts are symmetric, and llava-next reports 1 per image)",
           ("idefics3",)),
    Mutant("offsets-replacement-ids-kept", "hashing and cache: what a cached item holds",
           'ids = item.pop(f"{modality}_replacement_ids").data',
           'ids = item[f"{modality}_replacement_ids"].data',
           "a refactor avoiding mutation of the item: the ids stay in the cached item and reach "
           "the model as a keyword argument",
           ("llava",)),
    # --- unpadding ------------------------------------------------------------------------------
    Mutant("unpad-images-hw", "unpadding: batch-padded images",
           "image[..., :height, :width]",
           "image[..., :width, :height]",
           "height and width swapped when trimming (image_sizes is (h, w), PIL's is (w, h))",
           ("pixtral",)),
    Mutant("unpad-audio-batch-dim", "unpadding: audios processed alone",
           "hf_inputs[key] = [output[key][0] for output in alone]",
           "hf_inputs[key] = [output[key] for output in alone]",
           "the batch dimension of a one-audio call kept",
           ("qwen2_audio",)),
    # --- field slicing and row attribution ------------------------------------------------------
    Mutant("slice-dim-last-axis", "field slicing: which dimension holds rows",
           "if data.shape[0] != total_rows and data.shape[1] == total_rows:",
           "if data.shape[0] != total_rows and data.shape[-1] == total_rows:",
           "a typo, the last dimension for the second (Idefics3's leading batch dimension)",
           ("idefics3",)),
    Mutant("fields-audio-flat", "field slicing: audio fields batched",
           'if modality == "audio" or isinstance(hf_inputs[key], list)',
           "if isinstance(hf_inputs[key], list)",
           "the audio special case dropped: audio fields cut by token counts like image rows",
           ("qwen2_audio",)),
    Mutant("attribution-masks-dropped", "row attribution: fields to a modality",
           'names.update((name, f"{name}_mask"))',
           "names.add(name)",
           "the 'redundant' companion mask removed: undeclared masks (Gemma3n's "
           "input_features_mask) are attributed to no modality and dropped",
           ("gemma3n",)),
    Mutant("offsets-audio-count-length", "counts: num_audio_tokens (Offsets)",
           "counts.append(int(ids.eq(_get_embed_token_id(ids)).sum()))",
           "counts.append(len(seq))",
           "the replacement's length taken for its embedding count (equal only without "
           "begin/end markers)",
           ("qwen2_audio", "audioflamingo3"),
           equivalent="measured equivalent on 5.17.0: Qwen2AudioProcessor's and "
                      "AudioFlamingo3Processor's replace_audio_token return only audio tokens "
                      "(no begin/end markers), so the length is the count; embed-count's "
                      "token-count sub-property compares num_audio_tokens with the embedding "
                      "positions and would see it on an audio fixture with markers (none "
                      "processes audio on the Offsets path: gemma3n and voxtral are unsupported "
                      "there; MusicFlamingo's has markers but native vLLM 0.31.0 dropped it, "
                      "Gemma 4's has them but its audio config names no max input length)"),
    # --- encoder output split per item ----------------------------------------------------------
    Mutant("split-first-item-size", "encoder: per-item split (un-padded images)",
           "embeddings.extend(self._split_embeddings(features, [split_sizes[index]]))",
           "embeddings.extend(self._split_embeddings(features, [split_sizes[0]]))",
           "an index typo: every item split by the first item's count",
           ("pixtral",),
           equivalent="measured equivalent on 5.17.0: of the fixtures only Pixtral's processor "
                      "(pixtral, mistral3) reaches the per-image loop (one row of pixel data per "
                      "image, un-padded), and it reports num_image_patches 1 for every image, so "
                      "split_sizes[0] == split_sizes[index] == 1 and the split keeps every row"),
    Mutant("select-kwargs-first-item", "encoder: per-item keyword arguments",
           "key: value[index : index + 1]",
           "key: value[0:1]",
           "an index typo: every item encoded with the first item's sizes",
           ("pixtral",)),
    Mutant("image-features-last-hidden", "encoder: which output holds the features",
           "return features.pooler_output",
           "return features.last_hidden_state",
           "transformers v5 returns a ModelOutput; its other field is the tower's raw output",
           ("llava",)),
    Mutant("split-tiles-padded-count", "encoder: per-item split of multi-tile images",
           "split_sizes = num_image_patches.flatten().tolist()",
           "split_sizes = num_image_patches.flatten().max().repeat(num_image_patches.numel())"
           ".tolist()",
           "tiles per image taken as the most any image has, the count a batch is padded to "
           "(Idefics3's processor pads its samples' tiles to the most, and its "
           "get_image_features drops the all-zero ones): the encoder's rows are cut in the "
           "wrong places once images have different tile counts",
           ("idefics3", "aya_vision")),
    Mutant("embeddings-bf16", "encoder: the dtype of the embeddings",
           "embeddings.extend(process_input(**kwargs) or [])",
           "embeddings.extend(e.to(torch.bfloat16) for e in process_input(**kwargs) or [])",
           "a cast hard-coded for a bf16 kernel or copied from a bf16 checkpoint: an fp32 "
           "deployment gets bf16-rounded embeddings (the merge casts them back to fp32)",
           ("llava",)),
    Mutant("audio-split-last-hidden", "encoder: audio features split per item",
           "return self._split_embeddings(audio_output.pooler_output, split_sizes)",
           "return self._split_embeddings(audio_output.last_hidden_state, split_sizes)",
           "the same ModelOutput confusion on the audio side",
           ("audioflamingo3",)),
    # --- M-RoPE ---------------------------------------------------------------------------------
    Mutant("mrope-batch-axis", "M-RoPE: positions of the one sequence",
           "mrope_positions = mrope_positions[:, 0]",
           "mrope_positions = mrope_positions[0]",
           "the batch axis taken for the first: get_rope_index returns [3, batch, seq]",
           ("qwen2_vl",)),
    Mutant("mrope-text-only-stack", "M-RoPE: the image grids of a text-only request",
           "image_grid_thw = torch.stack(image_grid_thw) if image_grid_thw else None",
           "image_grid_thw = torch.stack(image_grid_thw)",
           "the guard dropped as 'every M-RoPE request has images': a text-only request has no "
           "grid, and torch.stack of none raises",
           ("qwen2_5_vl",),
           raises="backend on 'text only': RuntimeError: stack expects a non-empty TensorList"),
    Mutant("mrope-type-ids-end", "M-RoPE: token types of each placeholder",
           "mm_token_type_ids[offset : offset + length] = mm_token_type_id",
           "mm_token_type_ids[offset : offset + length - 1] = mm_token_type_id",
           "an off-by-one reading the placeholder's end as inclusive: its last token is typed "
           "as text, so get_rope_index places it (and shifts what follows) as text",
           ("qwen2_vl",)),
    Mutant("mrope-type-ids-shift", "M-RoPE: token types of each placeholder",
           "mm_token_type_ids[offset : offset + length] = mm_token_type_id",
           "mm_token_type_ids[offset + 1 : offset + length + 1] = mm_token_type_id",
           "offsets read as 1-based (or as counted after a leading marker): each span typed one "
           "token late, its first token as text and the token after it as image",
           ("qwen2_vl",)),
    Mutant("mrope-type-ids-embeds-only", "M-RoPE: token types of each placeholder",
           "offset, length = position.offset, position.length",
           "offset, length = position.offset, position.get_num_embeds()",
           "only the embedding positions marked, the markers around them left as text",
           ("qwen2_vl",),
           equivalent="on every M-RoPE fixture (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, GLM-4V) an image's "
                      "replacement is its pad tokens only, so a placeholder's length is its "
                      "number of embeddings on both paths"),
    Mutant("forward-positions-axis", "M-RoPE: positions passed to the decoder",
           "positions = positions[:, None].contiguous()",
           "positions = positions[None].contiguous()",
           "the new axis inserted first: [1, 3, seq] instead of [3, 1, seq]",
           ("qwen2_vl",)),
)


# --- the private copy ---------------------------------------------------------------------------


def installed_package() -> Path:
    """The environment's `vllm` package directory (read only: it is uv's cache). Located, not
    imported (seconds saved), in a process that sees no PYTHONPATH (no private copy)."""
    out = subprocess.run([sys.executable, "-c", "import importlib.util, os; "
                          "print(os.path.dirname(importlib.util.find_spec('vllm').origin))"],
                         capture_output=True, text=True, check=True,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    return Path(out.stdout.strip().splitlines()[-1])


def fingerprint(path: Path) -> dict[str, object]:
    stat = path.stat()
    return {"inode": stat.st_ino, "links": stat.st_nlink,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def replace_file(path: Path, text: str) -> None:
    """Write `text` as a new inode at `path` (never through the old one), and drop its compiled
    bytecode: a one-line edit can keep the size and the second of the mtime the .pyc checks."""
    tmp = path.with_name(path.name + ".mutation-tmp")
    tmp.write_text(text)
    path.unlink()
    tmp.rename(path)
    for pyc in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
        pyc.unlink()


def private_dir(lane: int = 0) -> Path:
    """Each lane (a benchmark process running beside others) plants into its own copy."""
    return PRIVATE if lane == 0 else PRIVATE.with_name(f"{PRIVATE.name}-{lane}")


def private_copy(installed: Path, lane: int = 0) -> Path:
    """`.mutation/vllm-pkg/vllm`, a real copy of the installed package; files a killed earlier
    run left mutated are restored from the installed originals."""
    target = private_dir(lane) / "vllm"
    if not target.exists():
        private_dir(lane).mkdir(parents=True, exist_ok=True)
        # cp -a: new inodes (never -l), timestamps kept so the copied .pyc stay valid
        subprocess.run(["cp", "-a", str(installed), str(target)], check=True)
    for name in {m.file for m in MUTANTS}:
        original = (installed / BACKEND_DIR.relative_to("vllm") / name).read_text()
        copied = target / BACKEND_DIR.relative_to("vllm") / name
        if copied.read_text() != original:
            replace_file(copied, original)
    return target


def imported_from(env: dict[str, str]) -> str:
    out = subprocess.run([sys.executable, "-c", "import vllm; print(vllm.__file__)"],
                         capture_output=True, text=True, check=True, env=env, cwd=ROOT)
    return out.stdout.strip().splitlines()[-1]


def mutated_text(original: str, mutant: Mutant) -> str:
    """The file with `mutant` applied on exactly one line (else AssertionError)."""
    lines = original.splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if mutant.original in line
            and (not mutant.before or (i > 0 and mutant.before in lines[i - 1]))]
    assert len(hits) == 1, f"{mutant.id}: {len(hits)} lines match {mutant.original!r}"
    (index,) = hits
    assert lines[index].count(mutant.original) == 1, f"{mutant.id}: twice on one line"
    lines[index] = lines[index].replace(mutant.original, mutant.replacement)
    text = "".join(lines)
    compile(text, mutant.file, "exec")  # a mutant must be valid Python
    return text


@contextlib.contextmanager
def planted(copy: Path, installed: Path, mutant: Mutant) -> Iterator[None]:
    relative = BACKEND_DIR.relative_to("vllm") / mutant.file
    target = copy / relative
    original = (installed / relative).read_text()
    replace_file(target, mutated_text(original, mutant))
    try:
        yield
    finally:
        replace_file(target, original)


# --- runs and their comparison ------------------------------------------------------------------


def run_matrix(fixtures: list[str], versions: list[str], output: Path,
               env: dict[str, str]) -> dict[tuple[str, str, str], dict]:
    """The harness's own runner (`conformance run`), vllm-backend only: {(fixture, version,
    check): cell}."""
    shutil.rmtree(output, ignore_errors=True)
    output.mkdir(parents=True)
    # beside the folder: `conformance run` empties its output folder of files first
    with open(output.parent / f"{output.name}.log", "w") as log:
        subprocess.run(["nice", "-n", "10", sys.executable, "-m", "conformance", "run",
                        "--fixtures", ",".join(fixtures), "--versions", ",".join(versions),
                        "--subjects", "vllm-backend", "--output", str(output),
                        "--cell-timeout", str(CELL_TIMEOUT_S)],
                       cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    results = output / "results.json"
    if not results.exists():
        return {}
    return {(c["fixture"], c["version"], c["check"]): c
            for c in json.loads(results.read_text())["cells"]}


# An exception the subject raised, as the checks word it: "raised X", "backend: X",
# "impl on 'prompt': X" (model checks join several problems with "; "), and errors' "the valid
# case itself: the subject cannot process it: X"; each may follow labels of the prompt or the
# reference ("text only: backend: X", "vs hf: text only: impl: X")
_LABELS = r"(?:[\w .-]+: )*"
_EXCEPTION = re.compile(rf"^{_LABELS}(raised |(backend|impl)( on '[^']*')?: |the valid case "
                        r"itself: the subject cannot process it: )"
                        r"[A-Za-z_][\w.]*(Error|Exception)\b")


def shown(cell: dict) -> str:
    """What a cell says: the difference its verdict shows, whole (results.json's evidence,
    reports/README.md), else its detail."""
    return shown_evidence(cell) or cell.get("detail", "")


def unexplained(cell: dict) -> list[str]:
    """The differences no finding explains (the known ones say nothing about the mutant), the
    shown one whole; a model check's several problems one by one, as its data keeps them."""
    evidence = cell.get("evidence") or {"differences": []}
    found = [d["text"] for d in evidence["differences"] if not d.get("finding")]
    problems = cell.get("data", {}).get("problems")
    if found and isinstance(problems, list) and problems:
        return [str(p) for p in problems]
    return [shown(cell), *found] if found else [shown(cell)]


def is_comparison(cell: dict) -> bool:
    """A `fail` whose evidence holds at least one difference found by comparing, not only an
    exception the subject raised."""
    if cell["status"] != "fail":
        return False
    return any(not _EXCEPTION.match(part) for part in unexplained(cell))


def names_the_raise(mutant: Mutant, cell: dict) -> bool:
    """A `fail` whose evidence names the exception that is the mutant's whole effect."""
    return bool(mutant.raises) and cell["status"] == "fail" and \
        any(mutant.raises in part for part in unexplained(cell))


def one_line(detail: str, limit: int = 220) -> str:
    line = " ".join(detail.split())
    return line if len(line) <= limit else line[:limit - 3] + "..."


def outcome(mutant: Mutant, reference: dict, mutated: dict) -> dict:
    worse, masked = [], []
    for key, ref in sorted(reference.items()):
        fixture, version, check = key
        if fixture not in mutant.fixtures or version not in mutant.versions:
            continue
        cell = mutated.get(key, {"status": "crash", "detail": "no verdict (the run died)"})
        row = {"cell": f"{fixture}/{check}@{version}", "was": ref["status"],
               "now": cell["status"], "evidence": one_line(shown(cell))}
        if ref["status"] in GOOD and cell["status"] in BAD:
            row["precise"] = is_comparison(cell) or names_the_raise(mutant, cell)
            worse.append(row)
        elif cell["status"] == "xfail" and (ref["status"] == "pass" or
                                            shown(ref) != shown(cell)):
            # the mutant showed, but a known finding's evidence matched it: hidden
            row["finding"] = cell.get("finding", "")
            masked.append(row)
    if any(r["precise"] for r in worse):
        verdict = "killed (precise)"
    elif worse:
        verdict = "killed (not precise)"
    elif masked:
        verdict = "masked by a known finding"
    else:
        verdict = "survived"
    return {"outcome": verdict, "killing_cells": worse, "masked_cells": masked}


# Which check should have caught each mutant that no comparison caught (the gaps)
SHOULD_CATCH = {
    "profile-image-tokens-key": "a profiling check: get_mm_max_tokens_per_item vs native vLLM "
                                "and vs the largest observed item (none exists)",
    "attribution-masks-dropped": "slicing / encoder on a mixed-modality case of a supported "
                                 "two-modality fixture (gemma3n is unsupported, no other has two)",
    "offsets-audio-count-length": "embed-count's token count (num_audio_tokens vs the item's "
                                  "embedding positions) on an audio fixture whose replacement "
                                  "has begin/end markers (none runs on the Offsets path; "
                                  "qwen2_audio's and audioflamingo3's have none)",
    "offsets-missing-offsets-silent": "errors' 'processor without offsets' sub-case, which "
                                      "never runs once the n-1 sub-case meets the known bare "
                                      "assert (offsets-bare-assert)",
    "mrope-type-ids-end":
        "get_rope_index raises on every prompt with an image (the image's run of token types is "
        "one shorter than its grid: 'The expanded size of the tensor (39) must match the "
        "existing size (41)'), so mrope, model and generate see only the exception; mrope "
        "comparing the mm_token_type_ids the backend hands get_rope_index with the HF "
        "processor's own for the prompt (step against step, as slicing does with impl's rows) "
        "would catch it by a comparison",
}


def timed_run(name: str, resume: bool, run) -> tuple[dict, float]:
    """`run()` unless `resume` and its stored run and time exist; (cells, seconds)."""
    seconds_file = RUNS / f"{name}.seconds"
    if resume and seconds_file.exists() and (RUNS / name / "results.json").exists():
        return stored_cells(RUNS / name), float(seconds_file.read_text())
    t0 = time.perf_counter()
    cells = run()
    seconds = time.perf_counter() - t0
    seconds_file.write_text(f"{seconds:.1f}\n")
    return cells, seconds


def bench_mutation(only: tuple[str, ...] = (), *, lane: int = 0, resume: bool = False) -> dict:
    """Every chosen mutant's outcome. `resume`: runs already stored (with their time) are
    judged, not re-run; `lane`: which private copy this process plants into."""
    started = time.perf_counter()
    chosen = [m for m in MUTANTS if not only or m.id in only]
    installed = installed_package()
    watched = {name: installed / BACKEND_DIR.relative_to("vllm") / name
               for name in sorted({m.file for m in MUTANTS})}
    before = {name: fingerprint(path) for name, path in watched.items()}
    copy = private_copy(installed, lane)
    env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0", TOKENIZERS_PARALLELISM="false")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(private_dir(lane)),
                                                    env.get("PYTHONPATH")) if p)
    where = imported_from(env)
    assert where.startswith(str(copy)), f"vllm imported from {where}, not the private copy"
    for mutant in chosen:  # every mutant applies to exactly one line before any run
        mutated_text((installed / BACKEND_DIR.relative_to("vllm") / mutant.file).read_text(),
                     mutant)

    RUNS.mkdir(parents=True, exist_ok=True)
    by_version: dict[str, set[str]] = defaultdict(set)
    for mutant in chosen:
        for version in mutant.versions:
            by_version[version].update(mutant.fixtures)
    reference: dict = {}
    reference_seconds = 0.0
    for version, fixtures in sorted(by_version.items()):
        name = f"reference-{version}"
        cells, seconds = timed_run(name, resume, lambda v=version, f=fixtures, n=name:
                                   run_matrix(sorted(f), [v], RUNS / n, env))
        reference.update(cells)
        reference_seconds += seconds
        print(f"reference {version} ({seconds:.0f} s): {sorted(fixtures)}", flush=True)

    results = []
    for mutant in chosen:
        def run(mutant: Mutant = mutant) -> dict:
            with planted(copy, installed, mutant):
                return run_matrix(list(mutant.fixtures), list(mutant.versions),
                                  RUNS / mutant.id, env)

        mutated, seconds = timed_run(mutant.id, resume, run)
        row = {**asdict(mutant), **outcome(mutant, reference, mutated),
               "seconds": round(seconds, 1)}
        if row["outcome"] != "killed (precise)":
            row["should_catch"] = SHOULD_CATCH.get(mutant.id, "see its cells")
        results.append(row)
        print(f"{mutant.id}: {row['outcome']} ({row['seconds']:.0f} s)"
              + "".join(f"\n    {c['cell']} {c['was']} -> {c['now']}"
                        f"{' (precise)' if c.get('precise') else ''}: {c['evidence']}"
                        for c in row["killing_cells"] + row["masked_cells"]), flush=True)

    after = {name: fingerprint(path) for name, path in watched.items()}
    assert after == before, f"the installed backend changed: {before} -> {after}"
    return summarise(results, {
        "reference_seconds": round(reference_seconds, 1),
        "seconds_total": round(time.perf_counter() - started, 1),
        "cell_timeout_s": CELL_TIMEOUT_S,
        "installed_file_untouched": after == before, "installed_fingerprint": after,
        "imported_from": where.replace(str(ROOT) + os.sep, ""),
    })


def summarise(results: list[dict], run: dict) -> dict:
    """The score (precise kills / non-equivalent mutants), the outcomes, the survivors."""
    precise = sum(r["outcome"] == "killed (precise)" for r in results)
    equivalent = sum(bool(r.get("equivalent")) for r in results)
    counts: dict[str, int] = defaultdict(int)
    for r in results:
        counts[r["outcome"]] += 1
    return {
        "vllm": "0.31.0", "backend_dir": str(BACKEND_DIR),
        "mutants": len(results), "precise_kills": precise,
        "equivalent_mutants": equivalent,
        "score": (round(precise / (len(results) - equivalent), 3)
                  if len(results) > equivalent else None), "target": 0.9,
        "score_all_mutants": round(precise / len(results), 3) if results else None,
        "outcomes": dict(counts),
        "survivors": [{"id": r["id"], "outcome": r["outcome"], "step": r["step"],
                       "should_catch": r.get("should_catch", ""),
                       **({"equivalent": r["equivalent"]} if r.get("equivalent") else {})}
                      for r in results if r["outcome"] != "killed (precise)"],
        "results": results,
        **run,
    }


def stored_cells(folder: Path) -> dict[tuple[str, str, str], dict]:
    results = folder / "results.json"
    if not results.exists():
        return {}
    return {(c["fixture"], c["version"], c["check"]): c
            for c in json.loads(results.read_text())["cells"]}


def merged(previous: dict, result: dict) -> dict:
    """The stored entry `previous` with `result`'s mutants added, or replacing their earlier
    outcomes; every other mutant's outcome is kept as it was judged, and the score is
    recomputed over all of them. `runs` lists each run that contributed (the first from
    `previous`'s own fields where it has no list yet)."""
    order = [m.id for m in MUTANTS]
    new = {r["id"]: r for r in result["results"]}
    kept = [r for r in previous.get("results", []) if r["id"] not in new and r["id"] in order]
    results = sorted([*kept, *new.values()], key=lambda r: order.index(r["id"]))
    for r in results:  # which check should catch a mutant is the list's data, not a run's
        if r["outcome"] != "killed (precise)":
            r["should_catch"] = SHOULD_CATCH.get(r["id"], r.get("should_catch", "see its cells"))
    fields = ("measured", "note", "seconds_total", "reference_seconds", "run_seconds",
              "installed_file_untouched")
    runs = list(previous.get("runs") or ([{
        **{k: previous[k] for k in fields if k in previous},
        "mutants": [r["id"] for r in previous["results"]]}] if previous.get("results") else []))
    runs = [{**run, "mutants": [m for m in run["mutants"] if m not in new]} for run in runs]
    runs = [run for run in runs if run["mutants"]]
    runs.append({"measured": result.get("measured", time.strftime("%Y-%m-%d")),
                 "mutants": [r["id"] for r in result["results"]],
                 **{k: result[k] for k in fields[2:] if k in result}})
    return summarise(results, {
        "runs": runs,
        "seconds_total": round(sum(run.get("seconds_total", 0) for run in runs), 1),
        "reference_seconds": round(sum(run.get("reference_seconds", 0) for run in runs), 1),
        "cell_timeout_s": CELL_TIMEOUT_S,
        "installed_file_untouched": all(run.get("installed_file_untouched", False)
                                        for run in runs),
        "installed_fingerprint": result["installed_fingerprint"],
        "imported_from": result["imported_from"],
        "pending": [m for m in order if m not in {r["id"] for r in results}],
        "measured": time.strftime("%Y-%m-%d"),
    })


def rejudge(previous: dict) -> dict:
    """Judge every stored run (.mutation/runs, with its time) again with the current mutant
    data and rules: a change of judgement, or runs made by several lanes, need no re-running.
    A mutant with no stored run keeps the outcome `previous` holds for it."""
    reference: dict = {}
    reference_seconds = 0.0
    for folder in sorted(p for p in RUNS.glob("reference-*") if p.is_dir()):
        reference.update(stored_cells(folder))
        reference_seconds += float((RUNS / f"{folder.name}.seconds").read_text())
    results = []
    for mutant in MUTANTS:
        seconds_file = RUNS / f"{mutant.id}.seconds"
        if not seconds_file.exists():
            continue
        row = {**asdict(mutant), **outcome(mutant, reference, stored_cells(RUNS / mutant.id)),
               "seconds": float(seconds_file.read_text())}
        if row["outcome"] != "killed (precise)":
            row["should_catch"] = SHOULD_CATCH.get(mutant.id, "see its cells")
        results.append(row)
    judged = {r["id"] for r in results}
    order = [m.id for m in MUTANTS]
    results += [r for r in previous.get("results", []) if r["id"] not in judged
                and r["id"] in order]
    results.sort(key=lambda r: order.index(r["id"]))
    keep = ("installed_file_untouched", "imported_from", "seconds_total", "runs")
    installed = installed_package()
    return summarise(results, {
        **{k: previous[k] for k in keep if k in previous},
        "cell_timeout_s": CELL_TIMEOUT_S,
        "pending": [m.id for m in MUTANTS if m.id not in {r["id"] for r in results}],
        # the installed file as it is now: its inode and link count show it was never replaced
        "installed_fingerprint": {name: fingerprint(installed / BACKEND_DIR.relative_to("vllm")
                                                    / name) for name in {m.file for m in MUTANTS}},
        "reference_seconds": round(reference_seconds, 1),
        "run_seconds": round(reference_seconds + sum(r["seconds"] for r in results), 1),
    })


def print_result(result: dict) -> None:
    """One line per mutant: its outcome and the cell that decided it, then the score."""
    for r in result["results"]:
        cells = [c for c in r["killing_cells"] if c.get("precise")] or r["killing_cells"] \
            or r["masked_cells"]
        where = (f"{cells[0]['cell']} {cells[0]['was']} -> {cells[0]['now']}: "
                 f"{cells[0]['evidence'][:110]}") if cells else r.get("should_catch", "")
        print(f"{r['id']:35} {r['outcome']:25} {where}")
    scored = result["mutants"] - result["equivalent_mutants"]
    print(f"score {result['precise_kills']}/{scored} = {result['score']} (target "
          f"{result['target']}; {result['equivalent_mutants']} equivalent mutants left out; "
          f"{result['score_all_mutants']} of all {result['mutants']}); "
          f"{result.get('seconds_total', result.get('run_seconds', 0)) / 60:.0f} min of runs")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated mutant ids (default: all)")
    parser.add_argument("--list", action="store_true", help="print the mutants and exit")
    parser.add_argument("--json", help="write the result here")
    parser.add_argument("--resume", action="store_true",
                        help="judge runs already stored under .mutation/runs instead of "
                             "re-running them")
    parser.add_argument("--lane", type=int, default=0,
                        help="private copy to plant into (another process runs beside)")
    parser.add_argument("--rejudge", metavar="BENCH_JSON",
                        help="judge the stored runs again and rewrite BENCH_JSON's 'mutation'")
    parser.add_argument("--merge", metavar="BENCH_JSON",
                        help="add the chosen mutants' outcomes to BENCH_JSON's 'mutation' "
                             "(keeping the other mutants'), score recomputed over all")
    parser.add_argument("--from", dest="from_json", metavar="RESULT_JSON",
                        help="with --merge: merge this earlier --json result, run nothing")
    args = parser.parse_args()
    if args.list:
        for m in MUTANTS:
            print(f"{m.id:35} {m.step:55} {','.join(m.fixtures)}@{','.join(m.versions)}")
        return 0
    if args.rejudge:
        bench = json.loads(Path(args.rejudge).read_text())
        previous = bench.get("mutation", {})
        bench["mutation"] = {**rejudge(previous),
                             "measured": previous.get("measured", time.strftime("%Y-%m-%d"))}
        Path(args.rejudge).write_text(json.dumps(bench, indent=2, sort_keys=True) + "\n")
        print_result(bench["mutation"])
        return 0
    only = tuple(p for p in (args.only or "").split(",") if p)
    if args.from_json:
        if not args.merge:
            parser.error("--from needs --merge")
        result = json.loads(Path(args.from_json).read_text())
    else:
        result = {**bench_mutation(only, lane=args.lane, resume=args.resume),
                  "measured": time.strftime("%Y-%m-%d")}
        print_result(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    if args.merge:
        bench = json.loads(Path(args.merge).read_text())
        bench["mutation"] = merged(bench.get("mutation", {}), result)
        Path(args.merge).write_text(json.dumps(bench, indent=2, sort_keys=True) + "\n")
        print_result(bench["mutation"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
