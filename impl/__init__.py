"""From-scratch reference of vLLM 0.31.0's Transformers multimodal backend behaviour.

Imports only torch, numpy, transformers and the standard library.
"""

from impl.pipeline import process, strategy_for
from impl.types import Placeholder, ProcessedPrompt

__all__ = ["Placeholder", "ProcessedPrompt", "process", "strategy_for"]
