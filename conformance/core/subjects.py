"""The subjects' and oracles' names, written once: cells, verdicts, findings, proofs and the
subject registry (`conformance.subjects.REGISTRY`) all say them the same way."""

IMPL = "impl"  # our reference implementation of the backend
VLLM_BACKEND = "vllm-backend"  # vLLM's Transformers backend: what is under test
VLLM_NATIVE = "vllm-native"  # vLLM's native processor for the architecture (an oracle)
HF = "hf"  # the HF processor's own expansion (an oracle that needs no vLLM model)

SUBJECTS = (IMPL, VLLM_BACKEND)  # what a run checks by default
ORACLES = (VLLM_NATIVE, HF)
