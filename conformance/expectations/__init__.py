"""Known findings, read from `findings.toml` (data a reviewer reads, never code in the tests).

`explain` answers "which finding explains this failure?" for one cell; `applicable` "which
finding applies to this cell at all?" (a cell it applies to that passes, having run enough to
speak for its inputs, shows a stale finding: `xpass`). `document.findings_markdown` renders
the generated docs/findings.md.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from conformance.core.signatures import magnitude
from conformance.paths import ROOT
from impl.version import bounds, matches

FINDINGS_FILE = Path(__file__).resolve().parent / "findings.toml"
ANY = "*"


@dataclass(frozen=True)
class Finding:
    id: str
    title: str
    reason: str
    fixtures: tuple[str, ...]  # ("*",): every fixture
    # check ("*": any), or "check@fixture" (that fixture only) -> one must be observed
    evidence: Mapping[str, tuple[str, ...]]
    versions: str = ""  # ">=5.15,<5.17"; "": every version
    subjects: tuple[str, ...] = ()  # empty: any
    # processor options the failing case must set; "name@fixture": on that fixture only (a
    # finding of several fixtures, each showing it under its own option)
    options: tuple[str, ...] = ()
    whole_cell: str = ""  # why every check of the cell is meaningless (allows "*" unbounded)
    vllm: str = ""  # vLLM releases it concerns: ">=0.31.0,<0.32.0"; "": every release
    side: str = "backend"  # who deviates from transformers (SIDES)
    # check ("*": any) -> the largest drift it explains ("off by", "max abs", "rel-L2"): a
    # failure that reports a drift is explained only within the bound stated for its check
    # ("check@fixture": for one fixture or variant alone)
    drift: Mapping[str, float] = field(default_factory=dict)
    explains_error: bool = False  # it may explain an `error` of the cell (set-up, a crash)
    # axis ("versions": transformers, "vllm") -> why it has no upper bound (OPEN_AXES)
    open: Mapping[str, str] = field(default_factory=dict)
    upstream: tuple[str, ...] = ()  # the vLLM / transformers issues or PRs filed for it (UPSTREAM)
    # the standalone scripts under reports/confirm/ that confirm it, from the repository root
    confirmed_by: tuple[str, ...] = ()
    # the media a suite's cell must have compared for it to show (empty: any): a finding of
    # video items cannot show where no video was drawn (above a release's window), so such a
    # cell that passes is no stale finding (`stale_in`)
    modalities: tuple[str, ...] = ()

    @functools.cached_property
    def checks(self) -> tuple[str, ...]:
        # asked for every finding on every failure a cell judges: derived once
        return tuple(dict.fromkeys(key.partition("@")[0] for key in self.evidence))

    def checks_of(self, fixture: str) -> tuple[str, ...]:
        """The checks it claims on one fixture: evidence for a check, or for the check on that
        fixture (`check@fixture`); one fixture's own evidence claims no cell of another."""
        return tuple(dict.fromkeys(
            check for check, _, only in (key.partition("@") for key in self.evidence)
            if not only or only in _names(fixture)))

    def applies(self, fixture: str, check: str, version: str, subject: str | None = None,
                options: tuple[str, ...] = (), vllm: str | None = None) -> bool:
        """`vllm`: the cell's vLLM label (a folder's "0.32.1.dev5@src" by its version);
        None: any vLLM."""
        if ANY not in self.fixtures and not set(_names(fixture)) & set(self.fixtures):
            return False
        claimed = self.checks_of(fixture)
        if ANY not in claimed and check not in claimed:
            return False
        if subject and self.subjects and subject not in self.subjects:
            return False
        if not set(self.options_on(fixture)) <= set(options):
            return False
        if vllm is not None and not matches(vllm.split("@", 1)[0], self.vllm):
            return False
        return matches(version, self.versions)

    def stale_in(self, data: Mapping) -> bool:
        """Whether a cell that passed with `data` shows it no longer: not where the cell
        compared none of the media it needs (a suite's `compared_by_modality`)."""
        compared = data.get("compared_by_modality")
        if not self.modalities or not isinstance(compared, Mapping):
            return True
        return any(compared.get(modality) for modality in self.modalities)

    def options_on(self, fixture: str) -> tuple[str, ...]:
        """The options a failing case of `fixture` must set (`options`)."""
        return tuple(dict.fromkeys(
            name for name, _, only in (option.partition("@") for option in self.options)
            if not only or only in _names(fixture)))

    @property
    def option_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(option.partition("@")[0] for option in self.options))

    def shown_by(self, check: str, observed: str, fixture: str | None = None) -> bool:
        """One of its evidence strings for the check (and for the cell's fixture: a finding
        of several fixtures states what each one shows, so that one fixture's evidence never
        explains another's failure) is in `observed`, and a drift `observed` reports is
        within the bound the finding states for the check (none stated: it explains no
        drift, so a larger one, or a numeric difference beside a known one, is new)."""
        return self.part_shown(check, observed, fixture) is not None

    def part_shown(self, check: str, observed: str, fixture: str | None = None) -> str | None:
        """The evidence string of it that `observed` shows, as `shown_by` decides (None:
        it does not show the finding)."""
        # "check@fixture" and "*@fixture" (any check of that fixture), as `checks_of` claims them
        scoped = (tuple(e for name in _names(fixture) for key in (check, ANY)
                        for e in self.evidence.get(f"{key}@{name}", ())) if fixture else ())
        shown = self.evidence.get(check, ()) + self.evidence.get(ANY, ()) + scoped
        part = next((text for text in shown if text in observed), None)
        if part is None:
            return None
        drift = magnitude(observed)
        # a variant's own bound ("model@gemma3~qps168") first: its fields may scale a known
        # difference beyond what its base shows
        scoped_bounds = [self.drift[f"{check}@{name}"] for name in _names(fixture or "")
                         if f"{check}@{name}" in self.drift] if fixture else []
        bound = (scoped_bounds or [self.drift.get(check, self.drift.get(ANY))])[0]
        return part if drift is None or (bound is not None and drift <= bound) else None

    def describe_versions(self, spec: str | None = None) -> str:
        low, high = bounds(self.versions if spec is None else spec)
        if low and high:
            return f">={low}, <{high}"
        return f">={low}" if low else (f"<{high}" if high else "all")


def _names(fixture: str) -> tuple[str, ...]:
    """A config variant (`llava~full`, fixtures/variants/) answers to its own name and to its
    base fixture's: the base's findings hold for its variants (the same architecture and
    processor), and a finding of the variant alone names the variant."""
    base = fixture.partition("~")[0]
    return (fixture,) if base == fixture else (fixture, base)


# Which side of a three-way comparison deviates from transformers (`side` in findings.toml)
SIDES = {
    "backend": "vLLM's Transformers backend (and impl, which reproduces it)",
    "native": "native vLLM (the backend agrees with transformers)",
    "vllm": "both vLLM implementations (transformers computes otherwise)",
    "transformers": "transformers itself (the HF processor or model; vLLM agrees with itself)",
}


# The axes a finding bounds from above, each a field of its own: one without an upper bound says
# why in `open` (findings.toml's header)
OPEN_AXES = ("versions", "vllm")


def open_reasons(raw: dict) -> dict[str, str]:
    """`open`, checked: only the bounded axes, each a sentence, and none that has an upper
    bound (a reason beside a bound would contradict it)."""
    reasons = raw.get("open", {})
    if not isinstance(reasons, dict) or set(reasons) - set(OPEN_AXES):
        raise ValueError(f"finding {raw['id']!r}: `open` takes {' and '.join(OPEN_AXES)} only")
    for axis, why in reasons.items():
        if not isinstance(why, str) or not why.strip():
            raise ValueError(f"finding {raw['id']!r}: open.{axis} must say why")
        if bounds(raw.get(axis, ""))[1]:
            raise ValueError(f"finding {raw['id']!r}: open.{axis} beside an upper bound "
                             f"({axis} = {raw[axis]!r})")
    return {axis: " ".join(why.split()) for axis, why in reasons.items()}


# Where a finding is filed upstream: an issue or pull request of vLLM or transformers
UPSTREAM = re.compile(r"https://github\.com/(vllm-project/vllm|huggingface/transformers)/"
                      r"(issues|pull)/([1-9][0-9]*)")
# The committed standalone scripts (vLLM and transformers only) that confirm findings; the
# matrix's own reproducers (reports/repro/) are regenerated by every run and never committed
CONFIRM_DIR = PurePosixPath("reports/confirm")


def _strings(raw: dict, key: str) -> tuple[str, ...]:
    values = raw.get(key, [])
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values) or \
            len(set(values)) != len(values):
        raise ValueError(f"finding {raw['id']!r}: `{key}` takes a list of distinct strings, "
                         f"not {values!r}")
    return tuple(values)


def upstream_links(raw: dict) -> tuple[str, ...]:
    """`upstream`, checked: each an issue or pull request URL of vLLM or transformers."""
    links = _strings(raw, "upstream")
    for link in links:
        if not UPSTREAM.fullmatch(link):
            raise ValueError(f"finding {raw['id']!r}: upstream {link!r} is no "
                             "https://github.com/(vllm-project/vllm|huggingface/transformers)"
                             "/(issues|pull)/N")
    return links


def confirming_scripts(raw: dict, root: Path = ROOT) -> tuple[str, ...]:
    """`confirmed_by`, checked: each a script of reports/confirm/ that exists, named from the
    repository root."""
    scripts = _strings(raw, "confirmed_by")
    for script in scripts:
        path = PurePosixPath(script)
        if path.parent != CONFIRM_DIR or path.suffix != ".py" or not (root / path).is_file():
            raise ValueError(f"finding {raw['id']!r}: confirmed_by {script!r} is no script of "
                             f"{CONFIRM_DIR}/ in the repository (e.g. "
                             f"'{CONFIRM_DIR}/item_limits.py')")
    return scripts


def parse(raw: dict) -> Finding:
    unknown = set(raw) - {"id", "title", "reason", "fixtures", "evidence", "versions",
                          "subjects", "options", "whole_cell", "vllm", "side", "drift",
                          "explains_error", "open", "upstream", "confirmed_by", "modalities"}
    if unknown:
        raise ValueError(f"finding {raw.get('id')!r}: unknown keys {sorted(unknown)}")
    if raw.get("side", "backend") not in SIDES:
        raise ValueError(f"finding {raw['id']!r}: side {raw['side']!r} is none of "
                         f"{', '.join(SIDES)}")
    _, upper = bounds(raw.get("versions", ""))  # a malformed specifier fails at load
    if (ANY in raw["fixtures"] or ANY in raw["evidence"]) and not upper and \
            not raw.get("whole_cell"):
        # such an entry would explain any new failure of its cells on every future version
        raise ValueError(f"finding {raw['id']!r}: a '*' fixture or check needs an upper "
                         "transformers bound (the newest version it was measured on) or "
                         "`whole_cell`, why every check of the cell is meaningless")
    bounds(raw.get("vllm", ""))
    for table in ("evidence", "drift"):
        for key in raw.get(table, {}):
            check, _, fixture = key.partition("@")
            if fixture and fixture not in raw["fixtures"]:
                raise ValueError(f"finding {raw['id']!r}: {table} {key!r} names a fixture "
                                 "the finding does not list")
    return Finding(
        id=raw["id"], title=raw["title"], reason=" ".join(raw["reason"].split()),
        fixtures=tuple(raw["fixtures"]),
        evidence={check: tuple(texts) for check, texts in raw["evidence"].items()},
        versions=raw.get("versions", ""), subjects=tuple(raw.get("subjects", ())),
        options=tuple(raw.get("options", ())), vllm=raw.get("vllm", ""),
        whole_cell=" ".join(raw.get("whole_cell", "").split()),
        side=raw.get("side", "backend"),
        drift={check: float(bound) for check, bound in raw.get("drift", {}).items()},
        explains_error=bool(raw.get("explains_error", False)),
        open=open_reasons(raw),
        upstream=upstream_links(raw), confirmed_by=confirming_scripts(raw),
        modalities=tuple(raw.get("modalities", ())),
    )


@functools.cache
def load(path: Path = FINDINGS_FILE) -> tuple[Finding, ...]:
    with open(path, "rb") as stream:
        findings = tuple(parse(raw) for raw in tomllib.load(stream).get("finding", []))
    ids = [f.id for f in findings]
    if duplicates := sorted({i for i in ids if ids.count(i) > 1}):
        raise ValueError(f"{path.name}: finding ids used twice: {', '.join(duplicates)}")
    return findings


def get(finding_id: str) -> Finding:
    for finding in load():
        if finding.id == finding_id:
            return finding
    raise KeyError(f"no finding {finding_id!r}")


def explain(fixture: str, check: str, version: str, subject: str | None, observed: str,
            options: tuple[str, ...] = (), vllm: str | None = None,
            error: bool = False) -> Finding | None:
    """The finding that explains `observed` in this cell (None: nothing does, a new failure).
    `error`: the cell could not run (set-up, a crash), which only a finding that says it
    explains an error may explain."""
    for finding in load():
        if finding.applies(fixture, check, version, subject, options, vllm) and \
                finding.shown_by(check, observed, fixture) and \
                (finding.explains_error or not error):
            return finding
    return None


def applicable(fixture: str, check: str, version: str, subject: str | None = None,
               vllm: str | None = None) -> Finding | None:
    """A finding that applies to this cell on its default options, whatever was observed."""
    return next((f for f in load() if f.applies(fixture, check, version, subject, vllm=vllm)),
                None)
