"""Our reference implementation (`impl`) as a subject, on the checkpoint's own HF processor."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from conformance.core.subjects import IMPL
from conformance.core.vllms import current_label, impl_profile, video_comparable
from conformance.inputs.cases import Case
from conformance.inputs.forms import form_inputs
from conformance.subjects.faults import planted
from conformance.subjects.hf import CheckpointFiles
from conformance.subjects.protocol import CACHE, HF_PROCESSOR, PLANTS_FAULTS, VIDEO
from fixtures.recipe import Recipe
from impl.cache import ProcessorCache
from impl.release import DEFAULT
from impl.types import ProcessedPrompt

if TYPE_CHECKING:
    from conformance.subjects.faults import Fault


class ImplSubject(CheckpointFiles):
    """Our reference implementation on the fixture's HF processor, following the release
    profile of the vLLM under test (impl/release.py): video items where that profile serves
    them for this processor, as the backend would."""

    capabilities = frozenset({HF_PROCESSOR, CACHE, PLANTS_FAULTS})  # and VIDEO where it takes it

    def __init__(self, path: str, recipe: Recipe, fault: Fault | None = None):
        super().__init__(path, recipe)
        self.fault = fault
        self.name = IMPL if fault is None else f"{IMPL}+{fault}"
        self.profile = impl_profile(current_label()) or DEFAULT
        if getattr(recipe, "takes_video", False) and self.takes_video():
            self.capabilities = ImplSubject.capabilities | {VIDEO}

    def takes_video(self) -> bool:
        """Where video items are compared (`vllms.video_comparable`) and the profile serves
        them for the checkpoint's processor (impl's reading of the backend's own test)."""
        # lazy: impl.info imports torch (+1.1 s), kept out of importing the subjects package
        from impl.info import installed_transformers, supported_modalities

        if not video_comparable(current_label(), installed_transformers()):
            return False
        try:
            return "video" in supported_modalities(self.processor, profile=self.profile)
        except Exception:  # noqa: BLE001 - the cells report why the processor cannot be made
            return False

    def hf_processor(self) -> Any:
        return self.processor

    def new_cache(self, options: Any = ()) -> Any:
        """An empty processor cache (impl's: items under the hash of their input and the
        options, as vLLM's); `process(case, cache=...)` takes items from it and fills it."""
        return ProcessorCache()

    def process(self, case: Case, *, as_tokens: bool = False, cache: Any = None,
                request_kwargs: Mapping[str, Any] | None = None, form: str = "",
                **_: Any) -> ProcessedPrompt:
        """`request_kwargs`: options of this request alone (its `mm_processor_kwargs`), over
        the case's model-level ones; impl then builds the processor under both, as the backend
        does, and keeps the model-level one for what the backend counts with it. `form`: the
        case's options in that form, handed to impl's steps as vLLM hands them to the
        backend's (`form_inputs`: scoped ones as a group, the disk form's copy of the
        checkpoint)."""
        # lazy: impl.pipeline imports torch (+1.1 s), kept out of importing the subjects package
        import impl.pipeline
        from impl.options import construction_options

        given = form_inputs(form, case.processor_kwargs, case.modality, self.path)
        case = replace(case, processor_kwargs=given.model)
        if given.request:
            request_kwargs = {**given.request, **dict(request_kwargs or {})}
        folder = given.path
        prompt: str | list[int] = case.prompt(self.recipe.placeholder)
        # impl's steps are looked up at call time, so a planted fault can stand in for them
        with planted(self.fault):
            processor = self.processor_for(case.processor_kwargs, folder)
            # what the backend builds a request's processor from (`impl.options`)
            merged = construction_options(dict(case.processor_kwargs),
                                          dict(request_kwargs or {}), profile=self.profile)
            request_processor = (self.processor_for(tuple(sorted(merged.items())), folder)
                                 if request_kwargs else None)
            if as_tokens:
                prompt = processor.tokenizer.encode(
                    prompt, add_special_tokens=self.recipe.add_special_tokens)
            return impl.pipeline.process(processor, prompt, case.mm_data(),
                                         processor_kwargs=dict(case.processor_kwargs),
                                         request_kwargs=request_kwargs,
                                         request_processor=request_processor,
                                         config=self.config, cache=cache,
                                         model_id=folder or self.path, profile=self.profile)




def reference_row_layout(processor: Any, hf_inputs: Mapping[str, Any], case: Case
                         ) -> tuple[list[int], int | None]:
    """impl's rows per image and slice dimension for the HF processor's outputs `hf_inputs`
    for the case's images (after impl's unpadding): what the backend's must be."""
    # lazy: impl.fields imports torch (+1.1 s), kept out of importing the subjects package
    from impl.fields import image_row_layout

    # lazy: impl.unpad imports torch (+1.1 s), kept out of importing the subjects package
    from impl.unpad import apply_unpad_images

    inputs = dict(hf_inputs)
    apply_unpad_images(inputs)
    return image_row_layout(processor, inputs, case.items(), len(case.media),
                            dict(case.processor_kwargs))
