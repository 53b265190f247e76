"""What a failure's evidence says apart from its measured numbers, and how large its numeric
drift is: the judge holds a finding to the bound it states (a larger drift is a new failure),
and the gate tells a known cell's new difference from the one the baseline recorded.

The checks word a measured drift as "off by X" (logprobs), "max abs X" and "rel-L2 X" (tensors);
`magnitude` reads those. A `signature` masks measured values (numbers with a decimal point or an
exponent) and keeps integers: token ids, shapes, counts and positions are part of what differs.
A `difference_kind` masks every value: what a search groups its failures by while it shrinks
them, and what a finding's history is told apart by.
"""

from __future__ import annotations

import math
import re

_FLOAT = r"[-+]?(?:\d+\.\d*(?:e[-+]?\d+)?|\d+e[-+]?\d+|nan|inf)"
_MEASURED = re.compile(rf"(?:off by|max abs|rel-L2) ({_FLOAT}|\d+)", re.IGNORECASE)
_MEASUREMENT = re.compile(rf"(?<![\w.]){_FLOAT}(?![\w.])", re.IGNORECASE)
# a Python set of quoted names, closed or cut at the end of the text (a dict's `'key': ` is no
# set: its first name is followed by a colon)
_SET = re.compile(r"\{'[^']*'(?:, '[^']*')*\}"
                  r"|\{'[^']*(?:'(?:, '[^']*')*(?:, ?(?:'[^']*)?)?)?$")


def magnitudes(evidence: str) -> list[float]:
    """Every drift the evidence reports, in the order it reports them."""
    return [float(m.group(1)) for m in _MEASURED.finditer(evidence)]


def magnitude(evidence: str) -> float | None:
    """The largest drift the evidence reports (None: it reports none)."""
    found = [math.inf if math.isnan(x) else x for x in magnitudes(evidence)]
    return max(found) if found else None


def signature(evidence: str) -> str:
    """The evidence with measured values masked as `#`, and each set of names (`{'a', 'b'}`)
    as `{…}`: a set prints in the order of its process's string hashes, different in every
    process, and a cut evidence keeps whichever of its names came first."""
    return _MEASUREMENT.sub("#", _SET.sub("{…}", evidence))


def difference_kind(check: str, evidence: str) -> str:
    """A difference's kind: the check and the evidence's wording without its values (numbers,
    hashes, quoted and bracketed values), up to its third clause. Stable while a case shrinks,
    distinct between sub-properties and kinds of difference."""
    return f"{check}: " + wording(evidence)


def wording(evidence: str) -> str:
    """A difference's kind without its check: what the gate groups failing cells by, so that
    one cause failing many checks (a release that cannot load a model) reads as one group."""
    text = re.sub(r"\[[^\]]*\]|\([^)]*\)|'[^']*'|\"[^\"]*\"", "…", evidence)
    text = re.sub(r"\b[0-9a-f]{16,}\b", "…", text)
    text = re.sub(r"\d+", "#", text)
    return ":".join(text.split(":")[:3]).strip()[:120]
