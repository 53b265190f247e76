"""How close a subject's tensors must be to native vLLM's, per precision, and how it is measured.

fp32 uses torch.allclose; lower precisions rel-L2 (and cosine), whose floors
shared/reference/gpu-noise-floor.md measured (bounds at twice the floor).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Tolerance:
    """Per-item bounds; fp32 uses torch.allclose, lower precisions rel-L2 (and cosine), whose
    floors /work/shared/reference/gpu-noise-floor.md measured (bounds at twice the floor)."""

    atol: float | None = None
    rtol: float | None = None
    max_rel_l2: float | None = None
    min_cosine: float | None = None

    def describe(self) -> str:
        parts = []
        if self.atol is not None:
            parts.append(f"atol {self.atol:g} / rtol {self.rtol:g}")
        if self.max_rel_l2 is not None:
            parts.append(f"rel-L2 <= {self.max_rel_l2:g}")
        if self.min_cosine is not None:
            parts.append(f"cosine >= {self.min_cosine:g}")
        return ", ".join(parts)


TOLERANCES = {
    "float32": Tolerance(atol=1e-5, rtol=1e-4),
    "bfloat16": Tolerance(max_rel_l2=0.025, min_cosine=0.9998),
    "float16": Tolerance(max_rel_l2=0.003),
}


def tolerance_for(dtype: str) -> Tolerance:
    name = str(dtype).removeprefix("torch.")
    name = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16",
            "float": "float32"}.get(name, name)
    if name not in TOLERANCES:
        raise ValueError(f"no tolerance for dtype {dtype!r} (known: {', '.join(TOLERANCES)})")
    return TOLERANCES[name]


@dataclass(frozen=True)
class Distance:
    max_abs: float
    rel_l2: float
    cosine: float
    allclose: bool

    def as_dict(self) -> dict[str, float | bool]:
        return {"max_abs": self.max_abs, "rel_l2": self.rel_l2, "cosine": self.cosine,
                "allclose": self.allclose}

    def describe(self) -> str:
        return f"max abs {self.max_abs:.3g}, rel-L2 {self.rel_l2:.3g}, cosine {self.cosine:.6f}"


def measure(actual: Any, expected: Any, tolerance: Tolerance) -> Distance:
    """Distances in float64 on the CPU; `allclose` only where the tolerance has atol/rtol."""
    import torch

    a = actual.detach().to("cpu", torch.float64).flatten()
    e = expected.detach().to("cpu", torch.float64).flatten()
    norm = float(e.norm())
    diff = a - e
    rel_l2 = float(diff.norm()) / norm if norm else float(diff.norm())
    denom = float(a.norm()) * norm
    cosine = float(a @ e) / denom if denom else (1.0 if not diff.any() else 0.0)
    close = tolerance.atol is None or torch.allclose(a, e, rtol=tolerance.rtol,
                                                     atol=tolerance.atol)
    return Distance(float(diff.abs().max()) if diff.numel() else 0.0, rel_l2, cosine, close)


def exceeds(distance: Distance, tolerance: Tolerance) -> bool:
    if not distance.allclose or math.isnan(distance.rel_l2):
        return True
    if tolerance.max_rel_l2 is not None and distance.rel_l2 > tolerance.max_rel_l2:
        return True
    return tolerance.min_cosine is not None and distance.cosine < tolerance.min_cosine


def compare_items(modality: str, expected: Sequence[Any], actual: Sequence[Any],
                  tolerance: Tolerance, ref: str = "native") -> tuple[list[str], list[dict]]:
    """Per item: (problems naming the item, measured distances); `ref` names the reference."""
    problems: list[str] = []
    rows: list[dict] = []
    if len(expected) != len(actual):
        problems.append(f"{ref} has {len(expected)} {modality} embeddings, this subject "
                        f"{len(actual)}")
    for index, (want, got) in enumerate(zip(expected, actual, strict=False)):
        where = f"{modality} item {index}"
        if tuple(want.shape) == tuple(got.shape):
            distance = measure(got, want, tolerance)
            rows.append({"item": index, "shape": list(got.shape), **distance.as_dict()})
            if exceeds(distance, tolerance):
                problems.append(f"{where}: {distance.describe()} (allowed {tolerance.describe()})")
            continue
        row = {"item": index, "shape": list(got.shape), f"{ref}_shape": list(want.shape)}
        problem = f"{where}: shape {tuple(got.shape)} vs {ref} {tuple(want.shape)}"
        if leading_columns(want, got):
            # e.g. Qwen3-VL: native appends deepstack features after the main embedding. The
            # part both have is judged apart: a known shape difference never hides a wrong
            # embedding in it.
            distance = measure(got, want[..., : got.shape[-1]], tolerance)
            row["leading_columns"] = distance.as_dict()
            if exceeds(distance, tolerance):
                problems.append(f"{where}: {ref}'s first {got.shape[-1]} columns differ: "
                                f"{distance.describe()} (allowed {tolerance.describe()})")
            else:
                problem += f"; {ref}'s first {got.shape[-1]} columns agree"
        rows.append(row)
        problems.append(problem)
    return problems, rows


def leading_columns(want: Any, got: Any) -> bool:
    """The native rows are wider by a whole multiple, the rest of the shape equal."""
    return (want.ndim == got.ndim >= 1 and want.shape[:-1] == got.shape[:-1]
            and got.shape[-1] > 0 and want.shape[-1] % got.shape[-1] == 0)
