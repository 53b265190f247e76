"""Which references agree: per model-level cell of the backend, how it, native vLLM and the HF
model relate (the `references` its check recorded), for the matrix views.

A model check compares the backend with every reference the checkpoint has and, with both, the
references with each other (`checks.model.references.three_way`). The views show that relation
per cell in a word, so a reader sees at a glance where native vLLM and transformers disagree
(a difference that is not the backend's) and where transformers is the only oracle.
"""

from __future__ import annotations

from collections import Counter

from conformance.core.subjects import VLLM_BACKEND
from conformance.results.cells import column_of, vllms_of
from conformance.results.verdict import Verdict

SUBJECT = VLLM_BACKEND
# The relation of one cell, in the order the legend lists them
RELATIONS = {
    "agree": "the backend, native vLLM and the HF model agree",
    "hf agrees": "no native model: the backend agrees with the HF model",
    "backend off": "the backend differs from both; native vLLM and the HF model agree",
    "native off": "native vLLM differs from the HF model; the backend agrees with the HF model",
    "hf off": "the HF model differs from both vLLM implementations",
    "all differ": "all three differ",
    "hf differs": "no native model: the backend differs from the HF model",
    "native agrees": "the HF model could not run: the backend agrees with native vLLM",
    "native differs": "the HF model could not run: the backend differs from native vLLM",
}


def relation(v: Verdict) -> str | None:
    """The cell's relation (a key of RELATIONS), None where the check compared nothing (it
    raised first, was n/a, or is not a model-level check of the backend)."""
    refs = v.data.get("references") if v.subject == SUBJECT else None
    if not isinstance(refs, dict):
        return None
    native, hf = refs.get("backend vs native"), refs.get("backend vs hf")
    if native is None and hf is None:
        return None
    if native is None:
        return "hf agrees" if hf == "agrees" else "hf differs"
    if hf is None:
        return "native agrees" if native == "agrees" else "native differs"
    if native == hf == "agrees":
        return "agree"
    if native == "differs" and hf == "differs":
        return "all differ" if refs.get("native vs hf") == "differ" else "backend off"
    return "native off" if native == "differs" else "hf off"


def relations(verdicts: list[Verdict]) -> dict[tuple[str, str, str], str]:
    """(fixture, check, column label) -> relation, for the cells that have one."""

    several = len(vllms_of(verdicts)) > 1
    found = {}
    for v in verdicts:
        word = relation(v)
        if word is not None:
            found[(v.fixture, v.check, column_of(v, several))] = word
    return found


def summary_line(found: dict[tuple[str, str, str], str]) -> str:
    counts = Counter(found.values())
    return ", ".join(f"{word} {counts[word]}" for word in RELATIONS if counts[word])


def table_rows(found: dict[tuple[str, str, str], str], columns: list[str]
               ) -> tuple[list[str], list[tuple[str, str, list[str]]]]:
    """(columns, rows of (fixture, check, one relation per column, "" where none)), from
    `relations`' cells and the view's columns."""
    keys = dict.fromkeys((fixture, check) for fixture, check, _ in found)
    return columns, [(fixture, check, [found.get((fixture, check, c), "") for c in columns])
                     for fixture, check in keys]


def markdown_section(found: dict[tuple[str, str, str], str], columns: list[str]) -> list[str]:
    """The model checks' references per cell (`relations`' cells, the view's columns): a
    table, its legend, the totals."""
    if not found:
        return []
    columns, rows = table_rows(found, columns)
    lines = ["## Which references agree", "",
             "The model-level checks compare the backend with native vLLM (where vLLM has a "
             "native model) and with the HF model. Per cell:", ""]
    lines += [f"- *{word}*: {text}" for word, text in RELATIONS.items()]
    lines += ["- blank: nothing compared (`n/a`, or the check stopped before comparing)", "",
              f"Cells: {summary_line(found)}.", "",
              "| architecture | check | " + " | ".join(columns) + " |",
              "|---|---|" + "---|" * len(columns)]
    lines += [f"| {fixture} | {check} | " + " | ".join(words) + " |"
              for fixture, check, words in rows]
    return lines + [""]
