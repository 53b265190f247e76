"""Model-level checks: vLLM's Transformers backend (and impl driving the HF model) against
native vLLM on one checkpoint, split by domain and re-exported here.

- `tolerances`: how close is close enough, per precision, and how it is measured;
- `loading`: models and engines loaded once per process (`CACHE`);
- `inputs`: the prompts and items the checks feed, embedded the way vLLM batches them;
- the checks: `greedy` (`model`), `encoder`, `mrope`, `generate`.
"""

from conformance.checks.contract import NotApplicable
from conformance.checks.model.encoder import check_encoder
from conformance.checks.model.generate import (
    GENERATE_TOKENS,
    TOP_LOGPROBS,
    Decoded,
    check_generate,
    logprobs_difference,
)
from conformance.checks.model.inputs import error_text, two_item_inputs
from conformance.checks.model.loading import (
    BACKEND,
    CACHE,
    HF,
    NATIVE,
    cache_key,
    hf_model,
    llm,
    prepare,
    vllm_model,
)
from conformance.checks.model.mrope import check_mrope
from conformance.checks.model.references import subjects_compared
from conformance.checks.model.tolerances import (
    Distance,
    Tolerance,
    exceeds,
    measure,
    tolerance_for,
)

__all__ = [
    "BACKEND", "CACHE", "GENERATE_TOKENS", "HF", "NATIVE", "TOP_LOGPROBS", "Decoded",
    "Distance", "NotApplicable", "Tolerance", "cache_key", "check_encoder", "check_generate",
    "check_mrope", "error_text", "exceeds", "hf_model", "llm", "logprobs_difference", "measure",
    "prepare", "subjects_compared", "tolerance_for", "two_item_inputs", "vllm_model",
]
