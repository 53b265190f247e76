"""pooling: on a pooling checkpoint (an embedding or sequence-classification architecture,
served by the backend's `TransformersMultiModalEmbeddingModel` /
`TransformersMultiModalForSequenceClassification`), what the backend pools for each prompt
equals what each reference computes from the same checkpoint: native vLLM's pooling (where vLLM
has a model of its own) and the HF model's, within fp32 noise.

Two readings per prompt (one item, two items of the recipe's modality):
- the served output with vLLM's default pooler (`embed`: the L2-normalised pooled state;
  `classify`: the class probabilities), its pooling type (CLS, LAST, MEAN) read from the
  engine's resolved `pooler_config`, applied to the HF model's last hidden states the same way;
- every token's output (`token_embed` / `token_classify`, an engine of its own: vLLM takes one
  pooling task per engine). The default CLS pooling of a causal model reads the first token,
  which never sees the items; the per-token reading does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conformance.checks.contract import (
    MODEL_REFERENCES,
    PROBLEMS,
    Check,
    MediaHook,
    NotApplicable,
    Proof,
    returning_outcome,
)
from conformance.checks.model import hf_reference
from conformance.checks.model.inputs import error_text, item_limit
from conformance.checks.model.loading import (
    BACKEND,
    CACHE,
    NATIVE,
    cache_key,
    ensure_distributed,
    limits_for,
    llm,
)
from conformance.checks.model.references import HF_REF, references_of, worded
from conformance.core.subjects import VLLM_BACKEND
from conformance.inputs.media import audio_rate, make_items, mm_data
from conformance.subjects import vllm
from fixtures.recipe import Recipe

# fp32 on CPU, llava_embed on every default transformers (5.12.1 .. 5.25.0): the backend's
# per-token unit-norm embeddings differ from the HF model's by at most 1.2e-7, its pooled (CLS)
# embedding by 0.0; a bound 40x that is fp32 noise with room. Token states one position late
# (`backend-pooled-rolled`) move them by 0.39 to 0.62, an item's rows one position late
# (`backend-row-shifted`) the per-token ones by 0.23.
POOLED_ATOL = {"float32": 5e-6}
DEFAULT_ATOL = 1e-2  # lower precisions: bf16 rounding of unit vectors and probabilities


def pooling_task(recipe: Recipe) -> str:
    """`embed` or `classify`: what vLLM's architecture defaults give the recipe's class."""
    from vllm.config.model import try_match_architecture_defaults

    match = try_match_architecture_defaults(recipe.architecture)
    task = match[1][1] if match else "embed"
    return task if task in ("embed", "classify") else "embed"


def token_engine(recipe: Recipe, path: str, impl: str, task: str, device: str,
                 dtype: str) -> Any:
    """The engine serving `token_<task>` (vLLM takes one pooling task per engine)."""
    from vllm.config import PoolerConfig

    def make() -> Any:
        ensure_distributed()
        return vllm.engine(path, impl, limits_for(recipe), dtype=dtype, runner="pooling",
                           pooler_config=PoolerConfig(task=f"token_{task}"))

    return CACHE.get(cache_key(f"llm-token-{task}", path, impl, device, dtype), make)


def vllm_pooled(recipe: Recipe, path: str, impl: str, task: str, device: str, dtype: str,
                prompt: str, modality: str, items: list) -> dict[str, Any]:
    """vLLM's prompt ids, pooled output and per-token outputs for one prompt."""
    import torch

    request = {"prompt": prompt, "multi_modal_data":
               mm_data(modality, items, audio_rate(recipe, path))}
    engine = llm(recipe, path, impl, device, dtype)
    ensure_distributed()
    (out,) = (engine.embed if task == "embed" else engine.classify)(request, use_tqdm=False)
    pooled = out.outputs.embedding if task == "embed" else out.outputs.probs
    (tokens,) = token_engine(recipe, path, impl, task, device, dtype).encode(
        request, pooling_task=f"token_{task}", use_tqdm=False)
    pooling = engine.llm_engine.vllm_config.model_config.pooler_config.seq_pooling_type
    return {"ids": list(out.prompt_token_ids), "pooled": torch.tensor(pooled).float(),
            "tokens": torch.as_tensor(tokens.outputs.data).float(), "pooling": pooling}


def hf_pooled(recipe: Recipe, path: str, task: str, pooling: str, device: str, dtype: str,
              prompt: str, modality: str, items: list) -> dict[str, Any]:
    """The HF model's last hidden states, pooled as vLLM pools (`pooling`; L2-normalised for
    embed, the class head and softmax for classify), and per token."""
    import torch

    model = hf_reference.eager(hf_reference.generation_model(recipe, path, device, dtype))
    inputs = hf_reference.hf_inputs(path, prompt, modality, items, device, dtype)
    base = model if task == "embed" else model.base_model
    with torch.inference_mode():
        hidden = base(**inputs).last_hidden_state[0].float()
        if task == "classify":
            head = getattr(model, "score", None) or model.classifier
            per_token = torch.softmax(head(hidden.to(head.weight.dtype)).float(), dim=-1)
        else:
            per_token = torch.nn.functional.normalize(hidden, dim=-1)
    pooled = {"CLS": per_token[0], "LAST": per_token[-1]}.get(pooling)
    if pooling == "MEAN":
        mean = hidden.mean(0)
        pooled = (torch.nn.functional.normalize(mean, dim=-1) if task == "embed"
                  else torch.softmax(head(mean.to(head.weight.dtype)).float(), dim=-1))
    return {"ids": inputs["input_ids"][0].tolist(), "pooled": pooled, "tokens": per_token}


def pooled_differences(expected: dict, actual: dict, atol: float, what: str) -> tuple[list, dict]:
    """The backend's outputs against one reference's, for one prompt."""
    if expected["ids"] != actual["ids"]:
        pairs = enumerate(zip(expected["ids"], actual["ids"], strict=False))
        first = next((i for i, (a, b) in pairs if a != b),
                     min(len(expected["ids"]), len(actual["ids"])))
        return [f"{what}: prompt ids differ at position {first} (reference "
                f"{len(expected['ids'])} tokens, backend {len(actual['ids'])})"], {}
    problems, measured = [], {}
    for reading in ("pooled", "tokens"):
        want, got = expected[reading], actual[reading]
        if want.shape != got.shape:
            problems.append(f"{what}: {reading} shape {tuple(got.shape)} vs reference "
                            f"{tuple(want.shape)}")
            continue
        delta = (want - got).abs()
        measured[reading] = float(delta.max())
        if measured[reading] > atol:
            where = divmod(int(delta.argmax()), want.shape[-1]) if delta.ndim > 1 else (
                None, int(delta.argmax()))
            row = f"token {where[0]} " if where[0] is not None else ""
            problems.append(f"{what}: {reading} {row}[{where[1]}] reference "
                            f"{float(want.reshape(-1)[delta.argmax()]):.6f} vs backend "
                            f"{float(got.reshape(-1)[delta.argmax()]):.6f} (max abs "
                            f"{measured[reading]:.2e}, bound {atol:g})")
    return problems, measured


def check_pooling(recipe: Recipe, path: str, *, device: str = "cpu", dtype: str = "float32",
                  subject_media: MediaHook | None = None,
                  references: Sequence[str] | None = None) -> tuple[str | None, dict]:
    """Per prompt (one item, two items), the backend's pooled and per-token outputs against
    native vLLM's (where vLLM has a model) and the HF model's."""
    if not recipe.pooling:
        raise NotApplicable(f"{recipe.name} is a generation checkpoint (runner "
                            f"{recipe.runner!r}): nothing is pooled")
    task, atol = pooling_task(recipe), POOLED_ATOL.get(dtype, DEFAULT_ATOL)
    modality = recipe.modalities[0]
    limit = item_limit(recipe, path, modality)
    data: dict[str, Any] = {"task": task, "atol": atol, "prompts": []}
    problems: list[str] = []
    for count in (1, 2) if limit is None or limit >= 2 else (1,):
        prompt = recipe.render_prompt(modality, count)
        items = make_items(modality, count, audio_rate(recipe, path))
        own = subject_media(list(items)) if subject_media else items
        what = f"{count} {modality}(s)"
        try:
            backend = vllm_pooled(recipe, path, BACKEND, task, device, dtype, prompt, modality,
                                  own)
        except Exception as error:
            problems.append(f"backend: {error_text(error)}")
            break
        entry: dict[str, Any] = {"items": count, "pooling": backend["pooling"]}
        for ref in references_of(recipe, references):
            expected = (hf_pooled(recipe, path, task, backend["pooling"], device, dtype,
                                  prompt, modality, items) if ref == HF_REF else
                        vllm_pooled(recipe, path, NATIVE, task, device, dtype, prompt,
                                    modality, items))
            found, entry[ref] = pooled_differences(expected, backend, atol, what)
            problems += [worded(ref, text) for text in found]
        data["prompts"].append(entry)
    data[PROBLEMS] = problems
    return (problems[0] if problems else None), data


CHECK = Check(
    id="pooling",
    statement="On a pooling checkpoint, the backend's pooled output (embedding or class "
              "probabilities, vLLM's default pooler) and its per-token outputs equal each "
              "reference's, pooled the same way, within fp32 noise.",
    hint="the backend pools other states than transformers computes: compare the hidden "
         "states the pooling class hands its pooler, then the pooler config vLLM resolved",
    level="checkpoint", run=returning_outcome(check_pooling), loads_model=True,
    compared_with=MODEL_REFERENCES,
    proof=Proof("backend-pooled-rolled", "llava_embed", "vs hf: 1 image(s): pooled",
                subject=VLLM_BACKEND),
    matrix_fault="backend-pooled-rolled",
    # the items' rows misplaced: only the per-token reading sees them (CLS reads the BOS)
    more_proofs=(Proof("backend-row-shifted", "llava_embed", "vs hf: 1 image(s): tokens token",
                       subject=VLLM_BACKEND),),
)
