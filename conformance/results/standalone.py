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
items; and the model checks (`model`, `generate`, `encoder`, `mrope`): the backend as vLLM
serves the prompt against the HF model and native vLLM (`checks.model.reproducer`, a module
embedded from source). Other cells (impl's, cache, slicing, embed-count) keep their evidence
and case in results.json.
"""

from __future__ import annotations

import hashlib
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.inputs.cases import Case
from conformance.inputs.media import (
    SAMPLING_RATE,
    VIDEO_FPS,
    Media,
    make_media,
    smoke_media,
    video_metadata,
)
from conformance.results.verdict import Verdict
from fixtures.recipe import Recipe

CHECKS = ("processing", "prompt-ids", "placeholders", "errors")
SUBJECT = "vllm-backend"  # the backend is what an upstream issue is about (impl mirrors it)


@dataclass(frozen=True)
class Request:
    """One prompt with its items, as the failing cell fed it, and how to judge it."""

    prompt: str
    modality: str
    media: tuple[Media, ...]
    options: tuple[tuple[str, Any], ...]
    oracle: str  # "vllm" (native vLLM's processor) or "hf" (the HF processor's expansion)
    compare: str  # "ids", "ids+placeholders", or "error" (the prompt must raise a clear error)


def request_for(verdict: Verdict, recipe: Recipe, path: str) -> Request | None:
    """The request a failing cell's standalone reproducer replays (None: the cell has none)."""
    if verdict.subject != SUBJECT or verdict.check not in CHECKS or \
            verdict.status in ("pass", "n/a"):
        return None
    evidence = verdict.detail.split(" [observed: ", 1)[-1]
    oracle = "hf" if "vs hf:" in evidence or not recipe.native_in_vllm else "vllm"
    if verdict.check == "processing":
        from conformance.checks.processing import smoke_case

        case = smoke_case(recipe)
        prompt = recipe.render_prompt(case.modality, len(case.media))
        return Request(prompt, case.modality, case.media, (), oracle, "ids+placeholders")
    if "case" not in verdict.data:
        return None
    case = Case.from_json(verdict.data["case"])
    compare = "ids" if verdict.check == "prompt-ids" else "ids+placeholders"
    if verdict.check == "errors":
        case = failing_variant(case, recipe, path, evidence)
        if case is None:
            return None
        compare = "error"
    return Request(case.prompt(recipe.placeholder[case.modality]), case.modality, case.media,
                   case.processor_kwargs, oracle, compare)


def failing_variant(case: Case, recipe: Recipe, path: str, evidence: str) -> Case | None:
    """The input the errors check fed when it failed: one of its variants of the case."""
    from conformance.checks.errors import cases_for
    from conformance.subjects.context import make_context

    ctx = make_context(recipe.name, SUBJECT, path=path, recipe=recipe)
    return next((bad for bad, _, what, _ in cases_for(ctx, case) if evidence.startswith(what)),
                None)


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
    from conformance.checks.model.encoder import NESTED
    from conformance.checks.model.inputs import nested_media, two_item_inputs
    from conformance.checks.model.mrope import mrope_media, mrope_prompts

    if verdict.check == "mrope":
        prompts = mrope_prompts(recipe)
        _, prompt, count = next((p for p in prompts if repr(p[0]) in verdict.detail),
                                prompts[0])
        return prompt, "image", mrope_media(count)
    if verdict.check == "encoder" and f"'{NESTED}'" in verdict.detail:
        media = nested_media(recipe, path)
        if media is not None:
            return recipe.render_prompt(media[0].modality, len(media)), media[0].modality, \
                media
    modality, prompt, items = two_item_inputs(recipe, path)
    return prompt, modality, smoke_media(modality, len(items))


def default_checkpoint(checkpoint: str) -> str | None:
    """A hub id `check` was given becomes the script's default; a local path never does."""
    from conformance.inputs.checkpoints import HUB_ID

    return checkpoint if HUB_ID.match(checkpoint) and not Path(checkpoint).exists() else None


def model_script(verdict: Verdict, recipe: Recipe, path: str, checkpoint: str) -> str:
    """A model cell's reproducer: the header of the failing cell's inputs, then
    `checks.model.reproducer`'s source as it is."""
    import transformers
    import vllm
    from transformers import AutoConfig

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
        # the script's header holds the __future__ import, which only the top may
        body=inspect.getsource(reproducer).replace(
            "from __future__ import annotations\n", "").strip(),
        checkpoint=default_checkpoint(checkpoint), prompt=prompt, modality=modality,
        media=[(m.height, m.width, m.samples, m.seed) for m in media],
        sampling_rate=SAMPLING_RATE, native=recipe.native_in_vllm,
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
        from conformance.checks import get_check

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
    from conformance.subjects import vllm

    return {impl: vllm.model_options(path, impl) for impl in vllm.IMPLS
            if vllm.model_options(path, impl)}


def script(request: Request, verdict: Verdict, *, statement: str, checkpoint: str | None,
           formats: dict[str, dict[str, str]]) -> str:
    import transformers
    import vllm

    oracle = ("native vLLM's processor for the same checkpoint (model_impl=\"vllm\")"
              if request.oracle == "vllm" else "the HF processor's own expansion")
    items = ", ".join(m.describe() for m in request.media)
    observed = " ".join(verdict.detail.split())
    usage = "[CHECKPOINT]" if checkpoint else "CHECKPOINT"
    default = (f"default: {checkpoint}" if checkpoint else
               "the local checkpoint folder `conformance check` was given")
    known = f"Known as `{verdict.finding}`. " if verdict.finding else ""
    return TEMPLATE.format(
        check=verdict.check, vllm=vllm.__version__, transformers=transformers.__version__,
        oracle=oracle, prompt=request.prompt, items=items or "none",
        options=dict(request.options) or "none", statement=statement,
        observed=wrap(known + observed), usage=usage, where=default,
        checkpoint=checkpoint, prompt_literal=request.prompt, modality=request.modality,
        media=[(m.height, m.width, m.samples, m.seed, m.frames) for m in request.media],
        options_literal=dict(request.options), formats=formats, compare=request.compare,
        oracle_name=request.oracle, sampling_rate=SAMPLING_RATE,
        make_media=inspect.getsource(make_media).strip(),
        video_metadata=inspect.getsource(video_metadata).strip(), video_fps=VIDEO_FPS,
    )


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
options:    {options} (model-level processor options, mm_processor_kwargs)
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
CLEAR_ERRORS = (ValueError, RuntimeError, NotImplementedError)


{make_media}


{video_metadata}


def items():
    """vLLM's form: audios with their sampling rate, videos with their metadata."""
    made = [make_media(MODALITY, *item) for item in ITEMS]
    if MODALITY == "video":
        return [(item, video_metadata(len(item))) for item in made]
    return [(item, SAMPLING_RATE) for item in made] if MODALITY == "audio" else made


def vllm_processed(impl):
    """Prompt ids and per item (offset, length, embedding positions), from vLLM's processor
    made by its registry exactly as the engine makes it."""
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY

    config = ModelConfig(model=CHECKPOINT, model_impl=impl, limit_mm_per_prompt={{MODALITY: 8}},
                         mm_processor_kwargs=OPTIONS or None, mm_processor_cache_gb=0,
                         **FORMATS.get(impl, {{}}))
    processor = MULTIMODAL_REGISTRY.create_processor(config)
    out = processor(PROMPT, processor.info.parse_mm_data({{MODALITY: items()}}))
    ranges = []
    for r in out["mm_placeholders"].get(MODALITY, []):
        mask = [True] * r.length if r.is_embed is None else r.is_embed.tolist()
        ranges.append((r.offset, r.length, [r.offset + i for i, e in enumerate(mask) if e]))
    return list(out["prompt_token_ids"]), ranges


def rows(value):
    """The first row of a batched output, a tensor's or a list's, as ints."""
    return value[0].tolist() if hasattr(value[0], "tolist") else list(value[0])


def hf_processed():
    """The HF processor's own expansion: ids, and per item the span its token type marks
    (cut by the processor's own token counts), its embedding positions the model's token."""
    from transformers import AutoConfig, AutoProcessor

    processor = AutoProcessor.from_pretrained(CHECKPOINT, **OPTIONS)
    config = AutoConfig.from_pretrained(CHECKPOINT)
    made = [make_media(MODALITY, *item) for item in ITEMS]
    key = {{"image": "images", "audio": "audio", "video": "videos"}}[MODALITY]
    media = {{key: made}}
    if MODALITY == "video" and getattr(processor.video_processor, "do_sample_frames", False):
        # as vLLM's backend hands them over: every frame kept, no sampling
        media["video_metadata"] = [{{k: v for k, v in video_metadata(len(v)).items()
                                    if k != "do_sample_frames"}} for v in made]
        media["do_sample_frames"] = False
    # videos of different lengths do not stack into one tensor; the expansion is compared
    out = processor(text=PROMPT, **media, return_mm_token_type_ids=True,
                    return_tensors=None if MODALITY == "video" else "pt", **OPTIONS)
    ids = rows(out["input_ids"])
    token = next(int(v) for n in (MODALITY + "_token_id", MODALITY + "_token_index")
                 if (v := getattr(config, n, None)) is not None)
    type_ids = out.get("mm_token_type_ids", out.get("token_type_ids"))
    if type_ids is None:
        marked, counts = [i for i, t in enumerate(ids) if t == token], None
    else:
        marked = [i for i, t in enumerate(rows(type_ids))
                  if t == {{"image": 1, "video": 2, "audio": 3}}[MODALITY]]
        counter = getattr(processor, "_get_num_multimodal_tokens", None)
        counts = None
        if counter is not None and MODALITY == "image":
            counts = list(counter(image_sizes=[[h, w] for h, w, *_ in ITEMS],
                                  **OPTIONS)["num_image_tokens"])
        if counter is not None and MODALITY == "video":
            counts = list(counter(video_sizes=[[f, h, w] for h, w, _, _, f in ITEMS],
                                  **OPTIONS)["num_video_tokens"])
    spans, start = [], 0
    for count in counts or []:
        spans.append(marked[start:start + count])
        start += count
    if counts is None:  # contiguous runs
        for p in marked:
            if spans and spans[-1][-1] == p - 1:
                spans[-1].append(p)
            else:
                spans.append([p])
    return ids, [(s[0], s[-1] - s[0] + 1, [p for p in range(s[0], s[-1] + 1) if ids[p] == token])
                 for s in spans if s]


def difference(expected, actual, names):
    (ids_a, ranges_a), (ids_b, ranges_b) = expected, actual
    if ids_a != ids_b:
        i = next((i for i, (x, y) in enumerate(zip(ids_a, ids_b)) if x != y),
                 min(len(ids_a), len(ids_b)))
        return (f"prompt ids differ at position {{i}}: {{names[0]}} {{ids_a[i:i + 6]}} vs "
                f"{{names[1]}} {{ids_b[i:i + 6]}} (lengths {{len(ids_a)}} vs {{len(ids_b)}})")
    if COMPARE == "ids":
        return None
    if len(ranges_a) != len(ranges_b):
        return f"{{names[0]}} has {{len(ranges_a)}} placeholders, {{names[1]}} {{len(ranges_b)}}"
    for i, (a, b) in enumerate(zip(ranges_a, ranges_b)):
        if a != b:
            return (f"{{MODALITY}} item {{i}}: (offset, length, embedding positions) "
                    f"{{names[0]}} {{a[:2]}} {{a[2][:8]}} vs {{names[1]}} {{b[:2]}} {{b[2][:8]}}")
    return None


def oracle():
    return vllm_processed("vllm") if ORACLE == "vllm" else hf_processed()


def expect_clear_error():
    """The prompt cannot be placed: the backend must raise a clear error, or accept it exactly
    as native vLLM does."""
    try:
        got = vllm_processed("transformers")
    except CLEAR_ERRORS as error:
        print(f"backend raises a clear error: {{type(error).__name__}}: {{error}}")
        return 0
    except AssertionError as error:
        print(f"backend: a bare assertion instead of a clear error: {{error!r}}")
        return 1
    placed = len(got[1])
    if ORACLE == "hf":
        print(f"backend: no error; {{len(ITEMS)}} items placed as {{placed}}")
        return 0 if placed == len(ITEMS) else 1
    try:
        native = vllm_processed("vllm")
    except Exception as error:
        print(f"native vLLM rejects it ({{type(error).__name__}}: {{error}}), the backend "
              f"accepts it ({{len(ITEMS)}} items placed as {{placed}})")
        return 1
    found = difference(native, got, ("native", "backend"))
    print(f"backend: no error, unlike native: {{found}}" if found else "both accept it alike")
    return 1 if found else 0


def main():
    if CHECKPOINT is None:
        print(__doc__, file=sys.stderr)
        return 2
    import transformers
    import vllm

    print(f"vllm {{vllm.__version__}}, transformers {{transformers.__version__}}; {{CHECKPOINT}}")
    print(f"prompt {{PROMPT!r}} with {{len(ITEMS)}} {{MODALITY}} item(s)")
    if COMPARE == "error":
        return expect_clear_error()
    try:
        expected = oracle()
    except Exception as error:
        print(f"the oracle ({{ORACLE}}) cannot process it: {{type(error).__name__}}: {{error}}")
        return 2
    try:
        got = vllm_processed("transformers")
    except Exception as error:
        import traceback

        traceback.print_exc()
        print(f"FAILS: the backend raises {{type(error).__name__}}: {{error}}")
        return 1
    found = difference(expected, got, ("native" if ORACLE == "vllm" else "HF", "backend"))
    print(f"FAILS: {{found}}" if found else "passes: the backend agrees with the oracle")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
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
