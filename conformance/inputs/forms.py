"""The forms in which vLLM accepts processor options, and what each form hands a processor.

The same options reach vLLM's processing in five forms (issue #33):
- `model-flat`: `LLM(mm_processor_kwargs=opts)`, the form the suites' cases give them in;
- `model-scoped`: `LLM(mm_processor_kwargs={"images_kwargs": opts})` (`audio_kwargs`,
  `videos_kwargs`: by the modality of the items the options are for);
- `request-flat`: a prompt's own `mm_processor_kwargs` (the processor's `hf_processor_mm_kwargs`);
- `request-scoped`: the same, scoped by modality;
- `disk`: written into the checkpoint's own processor config (a copy of the checkpoint folder
  whose `processor_config.json` sub-config, or flat `preprocessor_config.json`, holds them).

A drawn case with options also carries one form besides model-flat (`Case.option_form`): the
`option forms` sub-property processes it in that form and compares. Everything here is data
and files; the subjects turn a form into their own calls (`FormInputs`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fixtures.cache import cache_dir

MODEL_FLAT = "model-flat"
MODEL_SCOPED = "model-scoped"
REQUEST_FLAT = "request-flat"
REQUEST_SCOPED = "request-scoped"
DISK = "disk"
FORMS = (MODEL_FLAT, MODEL_SCOPED, REQUEST_FLAT, REQUEST_SCOPED, DISK)
# The forms a case draws besides model-flat (the form of its own, main comparison)
OTHER_FORMS = FORMS[1:]
SCOPED_FORMS = (MODEL_SCOPED, REQUEST_SCOPED)
REQUEST_FORMS = (REQUEST_FLAT, REQUEST_SCOPED)

# Architectures (by recipe) where native vLLM's own handling of scoped options is unreliable,
# and why: its model is then not the oracle of the scoped forms, the HF processor given the same
# group is (`conformance.checks.option_forms`). Kept here rather than on the recipe: a recipe
# field would change every fixture's build digest (`fixtures/build.py`), rebuilding them all.
NATIVE_SCOPED_UNRELIABLE = {
    # reports/confirm/scoped_options.py, 5.17.0: 145 prompt ids natively vs 18 (HF, backend)
    name: (f"native vLLM's {title} reads do_image_splitting flat only: scoped "
           "({'images_kwargs': {...}}), model-level or per request, it splits the image where "
           "the HF processor given the same group does not")
    for name, title in (("smolvlm", "SmolVLM"), ("idefics3", "Idefics3"))
}

# transformers' per-modality kwargs groups (`ProcessingKwargs`), by the items' modality
SCOPES = {"image": "images_kwargs", "audio": "audio_kwargs", "video": "videos_kwargs"}
# the processor_config.json sub-config of each modality's processor, as transformers saves it
SUB_CONFIGS = {"image": "image_processor", "audio": "feature_extractor",
               "video": "video_processor"}
PREPROCESSOR_CONFIG = "preprocessor_config.json"  # the flat (hub) layout: one processor's own
PROCESSOR_CONFIG = "processor_config.json"


def scope(modality: str) -> str:
    return SCOPES[modality]


def scoped(options: Mapping[str, Any], modality: str) -> dict[str, Any]:
    """`options` scoped to `modality`'s kwargs group."""
    return {scope(modality): dict(options)}


@dataclass(frozen=True)
class FormInputs:
    """What a vLLM deployment is given for options in one form: model-level options, the
    request's own, and the checkpoint folder (None: the fixture's own)."""

    model: tuple[tuple[str, Any], ...] = ()
    request: dict[str, Any] = field(default_factory=dict)
    path: str | None = None


def form_inputs(form: str, options: tuple[tuple[str, Any], ...], modality: str,
                path: str) -> FormInputs:
    """The deployment that gives `options` (for items of `modality`) in `form`, for the
    checkpoint at `path`."""
    flat = dict(options)
    if form in ("", MODEL_FLAT) or not options:
        return FormInputs(model=options)
    if form == MODEL_SCOPED:
        return FormInputs(model=((scope(modality), freeze(flat)),))
    if form == REQUEST_FLAT:
        return FormInputs(request=flat)
    if form == REQUEST_SCOPED:
        return FormInputs(request=scoped(flat, modality))
    if form == DISK:
        return FormInputs(path=str(disk_folder(path, options, modality)))
    raise ValueError(f"unknown option form {form!r} (known: {', '.join(FORMS)})")


class Frozen(dict):
    """An option's value that is a mapping (`max_image_size={"longest_edge": 364}`), hashable
    so a case holding it can key the memos; never changed after it is made."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(options_key(self))


def freeze(value: Any) -> Any:
    return Frozen({k: freeze(v) for k, v in value.items()}) if isinstance(value, dict) else value


def frozen_options(options: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """An option set as cases hold it: sorted pairs, mapping values hashable."""
    return tuple(sorted((k, freeze(v)) for k, v in options.items()))


def parse_option(text: str) -> tuple[str | None, str, Any]:
    """`[SCOPE.]NAME=VALUE` as `conformance check --processor-option` takes it: the scope
    (`images_kwargs`, `audio_kwargs`, `videos_kwargs`; None: flat), the option's name, and its
    value read as JSON where it is JSON (`364`, `false`, `{"longest_edge": 364}`), else the
    text itself."""
    name, sep, raw = text.partition("=")
    if not sep or not name:
        raise ValueError(f"--processor-option {text!r}: expected [SCOPE.]NAME=VALUE")
    group, dot, option = name.partition(".")
    if not dot:
        group, option = "", name
    elif group not in SCOPES.values():
        raise ValueError(f"--processor-option {text!r}: scope {group!r} is none of "
                         f"{', '.join(SCOPES.values())}")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return group or None, option, freeze(value)


def options_key(options: Any) -> str:
    """A hashable key for options whose values may be dicts (a scoped form's)."""
    return json.dumps(options, sort_keys=True, default=repr)


def forms_root() -> Path:
    return cache_dir() / "option-forms"


def written_config(folder: Path, options: Mapping[str, Any], modality: str
                   ) -> tuple[str, dict[str, Any]]:
    """The processor config file of `folder` with `options` written where transformers reads
    `modality`'s processor defaults from: a flat `preprocessor_config.json` where the checkpoint
    has one (the hub layout of many), else `processor_config.json`'s sub-config of the
    modality (transformers 5's own layout), else its top level (options of the processor
    itself). Returns the file's name and its new content."""
    flat = folder / PREPROCESSOR_CONFIG
    if flat.is_file():
        return PREPROCESSOR_CONFIG, {**json.loads(flat.read_text()), **dict(options)}
    nested = folder / PROCESSOR_CONFIG
    content = json.loads(nested.read_text()) if nested.is_file() else {}
    sub = SUB_CONFIGS[modality]
    if isinstance(content.get(sub), dict):
        content[sub] = {**content[sub], **dict(options)}
    else:
        content.update(options)
    return PROCESSOR_CONFIG, content


def disk_folder(path: str, options: tuple[tuple[str, Any], ...], modality: str) -> Path:
    """A copy of the checkpoint folder at `path` whose processor config holds `options` for
    `modality` (`written_config`): every other file a link to the original, made once per
    checkpoint, options and modality (kept in the cache beside the fixtures)."""
    source = Path(path)
    digest = hashlib.sha256(options_key([str(source.resolve()), options, modality]).encode())
    target = forms_root() / f"{source.name}-{DISK}-{digest.hexdigest()[:12]}"
    if target.is_dir():
        return target
    name, content = written_config(source, dict(options), modality)
    staging = target.with_name(f"{target.name}.tmp{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for entry in source.iterdir():
        if entry.name != name:
            (staging / entry.name).symlink_to(entry.resolve())
    (staging / name).write_text(json.dumps(content, indent=2, sort_keys=True))
    try:
        staging.rename(target)
    except OSError:  # another process made it meanwhile: theirs is the same
        shutil.rmtree(staging, ignore_errors=True)
    return target


def describe(form: str, options: tuple[tuple[str, Any], ...], modality: str) -> str:
    """How a deployment writes `options` in `form`, as vLLM takes them."""
    flat = dict(options)
    return {
        MODEL_FLAT: f"LLM(mm_processor_kwargs={flat!r})",
        MODEL_SCOPED: f"LLM(mm_processor_kwargs={scoped(flat, modality)!r})",
        REQUEST_FLAT: f"prompt mm_processor_kwargs={flat!r}",
        REQUEST_SCOPED: f"prompt mm_processor_kwargs={scoped(flat, modality)!r}",
        DISK: f"{flat!r} written into the checkpoint's processor config",
    }[form or MODEL_FLAT]
