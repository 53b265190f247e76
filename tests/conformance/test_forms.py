"""Option forms (issue #33): what each form hands a deployment, the disk form's checkpoint copy,
and cases carrying their form through JSON and the strategies."""

import json

from hypothesis import given, settings

from conformance.inputs.cases import Case
from conformance.inputs.forms import (
    DISK,
    MODEL_FLAT,
    MODEL_SCOPED,
    OTHER_FORMS,
    REQUEST_FLAT,
    REQUEST_SCOPED,
    disk_folder,
    form_inputs,
)
from conformance.inputs.media import Media
from conformance.inputs.strategies import cases
from fixtures.registry import get_recipe

OPTIONS = (("max_pixels", 784),)


def test_each_form_gives_the_options_where_vllm_takes_them(tmp_path):
    path = str(tmp_path)
    assert form_inputs(MODEL_FLAT, OPTIONS, "image", path).model == OPTIONS
    assert form_inputs(MODEL_SCOPED, OPTIONS, "image", path).model == (
        ("images_kwargs", {"max_pixels": 784}),)
    assert form_inputs(REQUEST_FLAT, OPTIONS, "image", path).request == {"max_pixels": 784}
    assert form_inputs(REQUEST_SCOPED, OPTIONS, "audio", path).request == {
        "audio_kwargs": {"max_pixels": 784}}
    # no options: every form is the default deployment
    assert form_inputs(DISK, (), "image", path).path is None


def test_the_disk_form_writes_the_options_into_a_copy_of_the_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setenv("CONFORMANCE_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "ckpt"
    source.mkdir()
    (source / "config.json").write_text("{}")
    (source / "processor_config.json").write_text(json.dumps(
        {"image_processor": {"size": {"longest_edge": 3136}}, "processor_class": "X"}))
    folder = disk_folder(str(source), OPTIONS, "image")
    written = json.loads((folder / "processor_config.json").read_text())
    assert written["image_processor"] == {"size": {"longest_edge": 3136}, "max_pixels": 784}
    assert (folder / "config.json").resolve() == (source / "config.json").resolve()
    assert json.loads((source / "processor_config.json").read_text())["image_processor"] == {
        "size": {"longest_edge": 3136}}  # the fixture itself is untouched
    assert disk_folder(str(source), OPTIONS, "image") == folder  # made once

    (source / "preprocessor_config.json").write_text(json.dumps({"do_resize": True}))
    flat = disk_folder(str(source), (("do_resize", False),), "image")
    assert json.loads((flat / "preprocessor_config.json").read_text()) == {"do_resize": False}


def test_a_case_keeps_its_form_through_json_and_cases_without_one_read_as_before():
    case = Case("qwen2_vl", "image", ("", ""), (Media("image", height=16, width=16, seed=1),),
                OPTIONS, option_form=REQUEST_SCOPED)
    assert Case.from_json(case.to_json()) == case
    plain = Case("qwen2_vl", "image", ("", ""), case.media)
    assert "option_form" not in plain.to_json()
    assert Case.from_json(plain.to_json()) == plain


def test_a_drawn_case_with_options_carries_another_form():
    drawn = []

    @settings(max_examples=30, database=None)
    @given(cases(get_recipe("qwen2_vl"), with_options=True))
    def collect(case):
        drawn.append(case)

    collect()
    assert {case.option_form for case in drawn} == set(OTHER_FORMS)
    assert all(case.processor_kwargs for case in drawn)


def test_a_processor_option_is_read_with_its_scope_and_a_json_value():
    import pytest

    from conformance.cli.check import processor_options
    from conformance.inputs.forms import parse_option

    assert parse_option('images_kwargs.max_image_size={"longest_edge": 364}') == (
        "images_kwargs", "max_image_size", {"longest_edge": 364})
    assert parse_option("do_image_splitting=false") == (None, "do_image_splitting", False)
    assert parse_option("resample=bicubic")[2] == "bicubic"  # not JSON: the text itself
    options = processor_options(['images_kwargs.max_image_size={"longest_edge": 364}',
                                 "max_pixels=784"])
    assert options == {"max_image_size": {"longest_edge": 364}, "max_pixels": 784}
    hash(tuple(options.items()))  # a case holding them keys the memos
    for bad in ("max_pixels", "text_kwargs.x=1"):
        with pytest.raises(ValueError):
            parse_option(bad)
