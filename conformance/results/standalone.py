"""Standalone reproducers: one script per failing cell that can be attached to a vLLM or
transformers issue as it is.

A script imports only vLLM, transformers and torch (numpy and Pillow come with them), never this
project, and holds no path of this machine: it takes the checkpoint as its first argument (a
local folder or a hub id; a hub id `conformance check` was given is the default). It rebuilds
the failing case's items from their specs (`make_media`'s own source is embedded), runs the
prompt through vLLM's Transformers backend and through the oracle the cell compared it with
(native vLLM's processor for the same checkpoint, or the HF processor's own expansion), prints
the first difference, and exits 1 when it reproduces, 0 when it does not (2: it could not
compare, e.g. the oracle itself failed).

The checks whose failure is a processing difference of one prompt get one: `processing`,
`prompt-ids`, `placeholders`, and `errors` for a prompt whose placeholders do not match its
items (`results.processing_reproducer`, with the `hf` subject's own expansion,
`subjects.hf_expansion`); and the model checks (`model`, `generate`, `encoder`, `mrope`): the
backend as vLLM serves the prompt against the HF model and native vLLM
(`checks.model.reproducer`). Each body is a linted module embedded from source. Other cells
(impl's, cache, slicing, embed-count) keep their evidence and case in results.json.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from conformance.checks import get_check
from conformance.checks.errors import cases_for
from conformance.checks.processing import smoke_case
from conformance.core.subjects import VLLM_BACKEND
from conformance.inputs.cases import Case
from conformance.inputs.checkpoints import HUB_ID
from conformance.inputs.media import (
    SAMPLING_RATE,
    VIDEO_FPS,
    Media,
    audio_rate,
    make_media,
    smoke_media,
    video_metadata,
)
from conformance.results import processing_reproducer
from conformance.results.cells import one_line
from conformance.results.evidence import Difference
from conformance.results.verdict import Verdict
from conformance.subjects import hf_expansion, vllm
from conformance.subjects.context import make_context
from fixtures.recipe import Recipe

CHECKS = ("processing", "prompt-ids", "placeholders", "errors")
SUBJECT = VLLM_BACKEND  # the backend is what an upstream issue is about (impl mirrors it)


@dataclass(frozen=True)
class Request:
    """One prompt with its items, as the failing cell fed it, and how to judge it."""

    prompt: str
    modality: str
    media: tuple[Media, ...]
    options: tuple[tuple[str, Any], ...]
    oracle: str  # "vllm" (native vLLM's processor) or "hf" (the HF processor's expansion)
    compare: str  # "ids", "ids+placeholders", or "error" (the prompt must raise a clear error)
    form: str = ""  # the form vLLM is given the options in ("": model-level flat)


def request_for(verdict: Verdict, recipe: Recipe, path: str) -> Request | None:
    """The request a failing cell's standalone reproducer replays (None: the cell has none)."""
    if verdict.subject != SUBJECT or verdict.check not in CHECKS or \
            verdict.status in ("pass", "n/a"):
        return None
    # the difference the verdict shows (none where no judge saw one: a crash, an xpass)
    shown = verdict.evidence.first if verdict.evidence else Difference("", "")
    oracle = "hf" if shown.reference == "hf" or not recipe.native_in_vllm else "vllm"
    if verdict.check == "processing":
        case = smoke_case(recipe, path)
        prompt = recipe.render_prompt(case.modality, len(case.media))
        return Request(prompt, case.modality, case.media, (), oracle, "ids+placeholders")
    if "case" not in verdict.data:
        return None
    case = Case.from_json(verdict.data["case"])
    compare = "ids" if verdict.check == "prompt-ids" else "ids+placeholders"
    if verdict.check == "errors":
        case = failing_variant(case, recipe, path, shown.input)
        if case is None:
            return None
        compare = "error"
    # a difference of the option forms sub-property was found in the case's form
    form = case.option_form if case.option_form and shown.input == case.option_form else ""
    return Request(case.prompt(recipe.placeholder[case.modality]), case.modality, case.media,
                   case.processor_kwargs, oracle, compare, form)


def failing_variant(case: Case, recipe: Recipe, path: str, what: str) -> Case | None:
    """The input the errors check fed when it failed: its variant of the case that `what`
    (the difference's `input`) names."""

    ctx = make_context(recipe.name, SUBJECT, path=path, recipe=recipe)
    return next((bad for bad, _, said, _ in cases_for(ctx, case) if said == what), None)


MODEL_CHECKS = ("model", "generate", "encoder", "mrope")
# What each model check's reproducer claims of the backend, after "vLLM's Transformers backend"
CLAIMS = {
    "model": "decodes greedily as {references} do, in float32 (every top logprob within "
             "fp32 noise)",
    "generate": "decodes greedily as {references} do, in float32 (every top logprob within "
                "fp32 noise)",
    "encoder": "embeds each item as {references} do, in float32 (allclose)",
    "mrope": "places the prompt's tokens (M-RoPE positions and decode delta) as {references} do",
}


def model_inputs(verdict: Verdict, recipe: Recipe, path: str) -> tuple[str, str,
                                                                        tuple[Media, ...]]:
    """(prompt, modality, items) the failing model cell fed: the prompt its evidence names
    (mrope's prompts, encoder's nested items), else the recipe's two-item prompt."""
    # this module is imported by `conformance check`'s at its top
    # lazy: the model checks' package loads torch (+0.9 s on every command's start)
    from conformance.checks.model.encoder import NESTED
    from conformance.checks.model.inputs import nested_media, two_item_inputs
    from conformance.checks.model.mrope import mrope_media, mrope_prompts

    if verdict.check == "mrope":
        prompts = mrope_prompts(recipe)
        failed = [row["prompt"] for row in verdict.data.get("prompts", ())
                  if row.get("problems")]
        _, prompt, count = next((p for p in prompts if failed and p[0] == failed[0]),
                                prompts[0])
        return prompt, "image", mrope_media(count)
    if verdict.check == "encoder" and verdict.data.get(NESTED, {}).get("problems"):
        media = nested_media(recipe, path)
        if media is not None:
            return recipe.render_prompt(media[0].modality, len(media)), media[0].modality, \
                media
    modality, prompt, items = two_item_inputs(recipe, path)
    return prompt, modality, smoke_media(modality, len(items), audio_rate(recipe, path))


def media_rate(media: Sequence[Media]) -> int:
    """The sampling rate a reproducer gives its audio: the one the harness made it at."""
    return next((m.rate for m in media if m.modality == "audio"), SAMPLING_RATE)


def default_checkpoint(checkpoint: str) -> str | None:
    """A hub id `check` was given becomes the script's default; a local path never does."""

    return checkpoint if HUB_ID.match(checkpoint) and not Path(checkpoint).exists() else None


def model_script(verdict: Verdict, recipe: Recipe, path: str, checkpoint: str) -> str:
    """A model cell's reproducer: the header of the failing cell's inputs, then
    `checks.model.reproducer`'s source as it is."""
    import transformers
    import vllm
    from transformers import AutoConfig

    # lazy: the model checks' package loads torch (as model_inputs')
    from conformance.checks.model import reproducer
    from conformance.checks.model.generate import GENERATE_TOKENS, LOGPROB_ATOL
    from conformance.checks.model.tolerances import tolerance_for
    from conformance.subjects.hf import embed_token_id

    prompt, modality, media = model_inputs(verdict, recipe, path)
    references = "the HF model" + (" and native vLLM" if recipe.native_in_vllm else "")
    options: dict[str, Any] = {"tokens": GENERATE_TOKENS if verdict.check == "generate" else 1,
                               "atol": LOGPROB_ATOL["float32"]}
    if verdict.check == "encoder":
        tolerance = tolerance_for("float32")
        options = {"atol": tolerance.atol, "rtol": tolerance.rtol,
                   "prompt_of_one": recipe.render_prompt(modality, 1),
                   "token": embed_token_id(AutoConfig.from_pretrained(path), modality)}
    return MODEL_TEMPLATE.format(
        check=verdict.check, claim=CLAIMS[verdict.check].format(references=references),
        vllm=vllm.__version__, transformers=transformers.__version__,
        observed=wrap(verdict.detail), make_media=inspect.getsource(make_media).strip(),
        body=embedded_source(reproducer),
        checkpoint=default_checkpoint(checkpoint), prompt=prompt, modality=modality,
        media=[(m.height, m.width, m.samples, m.seed) for m in media],
        sampling_rate=media_rate(media), native=recipe.native_in_vllm,
        formats=checkpoint_formats(path), options=options)


def write_standalone(out_dir: Path, verdict: Verdict, recipe: Recipe, path: str,
                     checkpoint: str) -> Path | None:
    """Write the cell's standalone reproducer (None where its check has none). `checkpoint` is
    what `check` was given: a hub id becomes the script's default, a local path never does."""
    if verdict.check in MODEL_CHECKS and verdict.subject == SUBJECT and \
            verdict.status not in ("pass", "n/a"):
        source = model_script(verdict, recipe, path, checkpoint)
    else:
        request = request_for(verdict, recipe, path)
        if request is None:
            return None

        source = script(request, verdict, statement=get_check(verdict.check).statement,
                        checkpoint=default_checkpoint(checkpoint),
                        formats=checkpoint_formats(path))
    digest = hashlib.sha256(source.encode()).hexdigest()[:8]
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{recipe.name}-{verdict.check}-{digest}.py"
    target.write_text(source)
    target.chmod(0o755)
    return target


def checkpoint_formats(path: str) -> dict[str, dict[str, str]]:
    """Per implementation, the options choosing its half of a two-format checkpoint."""

    return {impl: vllm.model_options(path, impl) for impl in vllm.IMPLS
            if vllm.model_options(path, impl)}


def script(request: Request, verdict: Verdict, *, statement: str, checkpoint: str | None,
           formats: dict[str, dict[str, str]]) -> str:
    import transformers
    import vllm

    oracle = ("native vLLM's processor for the same checkpoint (model_impl=\"vllm\")"
              if request.oracle == "vllm" else "the HF processor's own expansion")
    items = ", ".join(m.describe() for m in request.media)
    observed = one_line(verdict.detail, None)
    usage = "[CHECKPOINT]" if checkpoint else "CHECKPOINT"
    default = (f"default: {checkpoint}" if checkpoint else
               "the local checkpoint folder `conformance check` was given")
    known = f"Known as `{verdict.finding}`. " if verdict.finding else ""
    return TEMPLATE.format(
        check=verdict.check, vllm=vllm.__version__, transformers=transformers.__version__,
        oracle=oracle, prompt=request.prompt, items=items or "none",
        options=dict(request.options) or "none", statement=statement,
        form=request.form or "model-level flat (mm_processor_kwargs)",
        form_literal=request.form,
        observed=wrap(known + observed), usage=usage, where=default,
        checkpoint=checkpoint, prompt_literal=request.prompt, modality=request.modality,
        media=[(m.height, m.width, m.samples, m.seed, m.frames) for m in request.media],
        options_literal=dict(request.options), formats=formats, compare=request.compare,
        oracle_name=request.oracle, sampling_rate=media_rate(request.media),
        make_media=inspect.getsource(make_media).strip(),
        video_metadata=inspect.getsource(video_metadata).strip(), video_fps=VIDEO_FPS,
        expansion=embedded_source(hf_expansion), body=embedded_source(processing_reproducer),
    )


# What the embedded modules import of this project: the script pastes those pieces itself
PROJECT = ("conformance", "impl", "fixtures")


def embedded_source(module: ModuleType) -> str:
    """A standalone-safe module's source as a script embeds it: without its `__future__`
    import (the script's header holds it, which only the top may) and without its imports
    of this project, whose pieces the script pastes beside it."""
    source = inspect.getsource(module)
    lines = source.splitlines()
    for node in reversed(ast.parse(source).body):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
            [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
        if any(name == "__future__" or name.split(".")[0] in PROJECT for name in names):
            del lines[node.lineno - 1:node.end_lineno]
    return "\n".join(lines).strip()


def wrap(text: str, width: int = 92, indent: str = "            ") -> str:
    lines, line = [], ""
    for word in text.replace('"""', "'''").split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return f"\n{indent}".join(lines)


TEMPLATE = '''#!/usr/bin/env python3
r"""`{check}`: vLLM {vllm}'s Transformers backend (model_impl="transformers") against {oracle}.

transformers: {transformers} (where it was recorded)
prompt:     {prompt!r}
items:      {items}
options:    {options} (processor options, given to vLLM {form})
expected:   {statement}
observed:   {observed}

Usage: python this_script.py {usage}   (a local checkpoint folder or a hub id; {where})
Needs vllm, transformers and torch only. Exit status 1: it reproduces; 0: it does not;
2: it cannot tell (no checkpoint given, or the oracle itself fails).
"""
from __future__ import annotations

import sys

CHECKPOINT = sys.argv[1] if len(sys.argv) > 1 else {checkpoint!r}
PROMPT = {prompt_literal!r}
MODALITY = {modality!r}
ITEMS = {media!r}  # (height, width, audio samples, seed, video frames) per item
OPTIONS = {options_literal!r}
FORMATS = {formats!r}  # which half of a two-format (Mistral + HF) checkpoint each reads
COMPARE = {compare!r}
ORACLE = {oracle_name!r}
SAMPLING_RATE = {sampling_rate!r}
VIDEO_FPS = {video_fps!r}


{make_media}


{video_metadata}


{expansion}


{body}


FORM = {form_literal!r}  # how vLLM is given OPTIONS ("": model-level mm_processor_kwargs)


REPLAY = Replay(CHECKPOINT, PROMPT, MODALITY, ITEMS, OPTIONS, FORMATS, COMPARE, ORACLE, FORM)

if __name__ == "__main__":
    sys.exit(main(REPLAY, __doc__))
'''


MODEL_TEMPLATE = '''#!/usr/bin/env python3
r"""`{check}`: vLLM {vllm}'s Transformers backend (model_impl="transformers") {claim}.
transformers: {transformers} (where it was recorded)
observed:   {observed}
Usage: python this_script.py CHECKPOINT   (a local checkpoint folder or a hub id)
Needs vllm, transformers and torch only. Exit status 1: it reproduces; 0: it does not;
2: it cannot tell (no checkpoint given, or a reference fails).
"""
from __future__ import annotations

import sys

{make_media}


{body}


CHECKPOINT = sys.argv[1] if len(sys.argv) > 1 else {checkpoint!r}
PROMPT = {prompt!r}
MODALITY = {modality!r}
SAMPLING_RATE = {sampling_rate!r}
MEDIA = {media!r}  # (height, width, audio samples, seed) per item
made = [make_media(MODALITY, h, w, n, seed) for h, w, n, seed in MEDIA]
ITEMS = [(wave, SAMPLING_RATE) for wave in made] if MODALITY == "audio" else made

if __name__ == "__main__":
    sys.exit(main(CHECKPOINT, {check!r}, PROMPT, MODALITY, ITEMS, native={native!r},
                  formats={formats!r}, **{options!r}))
'''
