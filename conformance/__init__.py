"""Conformance harness for vLLM's Transformers modeling backend for multimodal models."""

__version__ = "0.1.0"
