"""A verdict's evidence as data: every difference a cell observed, and what the judge made of
each (the finding that explains it and the part of the finding it matched, whether it was an
error of the cell, the processor options of its case).

The judge (results/judge.py) writes it once, into the verdict (`Verdict.evidence`, results.json's
`evidence`: reports/README.md); the reports render it (`line`); the gate, rejudge, reproducers
and the findings document read its fields. Only the judge reads a check's wording: nothing
downstream parses a verdict's text back (tests/test_evidence.py holds every module to that).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from conformance.core.signatures import magnitudes, signature, wording

# a difference's text is kept to its first CUT characters; the one a verdict shows, whole
CUT = 300

Options = tuple[tuple[str, str], ...]  # (name, repr of its value), as the case set them


@dataclass(frozen=True)
class Difference:
    """One difference (or error) a cell observed."""

    text: str  # as the check worded it, its first CUT characters
    kind: str  # the text with its measured values masked (`core.signatures.signature`)
    values: tuple[float, ...] = ()  # the drifts it reports ("off by", "max abs", "rel-L2")
    cut: bool = False  # the text filled the cut: its end (and its kind's) is lost
    finding: str = ""  # the finding that explains it; "": none does (a new failure)
    part: str = ""  # the finding's evidence string the text contains
    error: bool = False  # the cell could not run (set-up, a crash of the harness)
    # the processor options of the failing case; None: not recorded (a schema-1 result)
    options: Options | None = ()
    # the input variant the check found it on, where it names one (the errors check's
    # "2 placeholders for 1 items", an option form, an M-RoPE prompt, the encoder's nested
    # items): what a reproducer replays
    input: str = ""
    reference: str = ""  # "hf" where the difference is against the HF model (else native)

    @classmethod
    def of(cls, text: str, **fields: Any) -> Difference:
        kept = text[:CUT]
        return cls(kept, signature(kept), tuple(magnitudes(kept)), len(text) >= CUT, **fields)

    @property
    def drift(self) -> float | None:
        """The largest drift it reports (nan as inf: beyond any finite one); None: none."""
        found = [math.inf if math.isnan(x) else x for x in self.values]
        return max(found) if found else None

    @property
    def wording(self) -> str:
        """Its kind without any value (`core.signatures.wording`): what the gate groups
        failing cells by."""
        return wording(self.text)

    @property
    def stem(self) -> str:
        # a cut falls after as many characters as the measured values took: drop the token
        # it may have split, and compare what is left as a prefix
        return self.kind.rsplit(" ", 1)[0] if self.cut else self.kind

    def same(self, other: Difference) -> bool:
        """The same difference, its values aside (cut ones compared as far as both go)."""
        if not (self.cut or other.cut):
            return self.kind == other.kind
        return ((self.cut and other.stem.startswith(self.stem))
                or (other.cut and self.stem.startswith(other.stem)))

    def to_dict(self) -> dict:
        found = {"text": self.text, "kind": self.kind, "values": list(self.values),
                 "cut": self.cut, "finding": self.finding, "part": self.part,
                 "error": self.error, "input": self.input, "reference": self.reference,
                 "options": None if self.options is None else [list(o) for o in self.options]}
        if self.kind == self.text:  # nothing masked: written once, as its text
            del found["kind"]
        return {k: v for k, v in found.items() if v not in ("", False, [])}

    @classmethod
    def from_dict(cls, found: dict) -> Difference:
        options = found.get("options", [])
        return cls(found["text"], found.get("kind", found["text"]),
                   tuple(found.get("values", ())),
                   found.get("cut", False), found.get("finding", ""), found.get("part", ""),
                   found.get("error", False),
                   None if options is None else tuple((str(k), str(v)) for k, v in options),
                   found.get("input", ""), found.get("reference", ""))


@dataclass(frozen=True)
class Evidence:
    """Every difference of a cell, in the order its check reported them, and which one the
    verdict shows (the first no finding explains, else the first)."""

    differences: tuple[Difference, ...]
    shown: int = 0
    whole: str = ""  # the shown difference's whole text, where its kept text is cut

    @classmethod
    def showing(cls, differences: list[Difference] | tuple[Difference, ...], shown: int,
                whole: str) -> Evidence:
        """`differences`, the one at `shown` the verdict's (`whole`: its text uncut, kept
        only where its record is cut)."""
        return cls(tuple(differences), shown, whole if differences[shown].cut else "")

    @classmethod
    def of(cls, texts: list[str], finding: str = "", shown: int = 0) -> Evidence:
        """Differences as worded, all explained by `finding` ("": none): what a check or a
        test that has no judge at hand records."""
        return cls.showing([Difference.of(t, finding=finding) for t in texts], shown,
                           texts[shown])

    @property
    def first(self) -> Difference:
        return self.differences[self.shown]

    @property
    def shown_text(self) -> str:
        return self.whole or self.first.text

    @property
    def unexplained(self) -> tuple[Difference, ...]:
        return tuple(d for d in self.differences if not d.finding)

    @property
    def findings(self) -> tuple[str, ...]:
        """The findings that explain its differences, each once, sorted."""
        return tuple(sorted({d.finding for d in self.differences if d.finding}))

    @property
    def others(self) -> int:
        """How many differences beside the shown one."""
        return len(self.differences) - 1

    def texts(self) -> list[str]:
        return [d.text for d in self.differences]

    def reworded(self, text: str) -> Evidence:
        """The same evidence, its shown difference as `text` says it (an error's cause
        first: run/logs.py)."""
        new = Difference.of(text, **{k: getattr(self.first, k) for k in
                                     ("finding", "part", "error", "options", "input",
                                      "reference")})
        changed = list(self.differences)
        changed[self.shown] = new
        return self.showing(changed, self.shown, text)

    def to_dict(self) -> dict:
        found: dict[str, Any] = {"differences": [d.to_dict() for d in self.differences]}
        if self.shown:
            found["shown"] = self.shown
        if self.whole:
            found["whole"] = self.whole
        return found

    @classmethod
    def from_dict(cls, found: dict) -> Evidence:
        return cls(tuple(Difference.from_dict(d) for d in found["differences"]),
                   found.get("shown", 0), found.get("whole", ""))


def options_text(options: Options | None) -> str:
    if not options:
        return ""
    return " (with " + ", ".join(f"{k}={v}" for k, v in options) + ")"


def line(status: str, evidence: Evidence, reason: str | None) -> str:
    """What a verdict with evidence says in one line: the shown difference with its case's
    options and how many others there are, after the finding's reason where one explains
    the cell (`reason`: its statement; None where this checkout's findings lack it)."""
    more = f" (+{evidence.others} other distinct failure(s))" if evidence.others else ""
    options = options_text(evidence.first.options)
    if status != "xfail":
        return evidence.shown_text + options + more
    said = reason if reason is not None else "(a finding not in this checkout's findings.toml)"
    return f"{said} [observed: {evidence.shown_text}]{options}{more}"
