"""Known, understood disagreements: a failing cell listed here is `xfail` with this exact reason.

A cell listed here that passes is `xpass`, which counts as bad: the entry is stale and must go.
Never widen a comparison to make a cell pass; record the finding here instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from conformance.versions import parse_version


@dataclass(frozen=True)
class Known:
    fixture: str  # "*": every fixture
    check: str
    reason: str  # the exact difference and its cause
    evidence: str | tuple[str, ...]  # one must appear in what was observed: a new failure of
    # the same cell is not hidden behind a known one
    min_version: str | None = None  # inclusive
    max_version: str | None = None  # exclusive
    subjects: tuple[str, ...] = ()  # suite subjects it concerns; empty: any
    options: tuple[str, ...] = ()  # processor options the failing case must set; empty: any

    def shown_by(self, observed: str, options: tuple[str, ...] = ()) -> bool:
        if not set(self.options) <= set(options):
            return False
        shown = (self.evidence,) if isinstance(self.evidence, str) else self.evidence
        return any(text in observed for text in shown)

    def applies(self, fixture: str, check: str, version: str, subject: str | None = None) -> bool:
        if self.check not in ("*", check) or self.fixture not in ("*", fixture):
            return False
        if subject and self.subjects and subject not in self.subjects:
            return False
        v = parse_version(version)
        if self.min_version and v < parse_version(self.min_version):
            return False
        return not (self.max_version and v >= parse_version(self.max_version))


_GEMMA3_NEWLINES = (
    "Offsets path: the backend tokenizes each item's replacement text "
    "('\\n\\n<start_of_image>' + soft tokens + '<end_of_image>\\n\\n') on its own and splices it "
    "in, so the newlines at its edges stay separate tokens from the newlines next to them (a "
    "'\\n' written beside the placeholder, or the next image's '\\n\\n'); the HF processor and "
    "native vLLM tokenize the expanded text, where such a run merges into one token ('\\n\\n\\n', "
    "'\\n\\n\\n\\n'; native vLLM re-merges newline pairs on purpose). The backend's prompt is "
    "longer and every later position shifts."
)

_QWEN2_AUDIO_NO_OFFSETS = (
    "transformers 5.15.x's Qwen2AudioProcessor expands <|AUDIO|> without reaching "
    "get_text_with_replacements, so it returns no text_replacement_offsets and the backend's "
    "Offsets path (transformers >= 5.15.0) raises instead of locating the audio placeholders. "
    "Measured failing on 5.15.1; 5.17.0 returns offsets."
)

_GEMMA3_LEGACY_RANGES = (
    "Legacy path: Gemma3's token_type_ids mark only the <image_soft_token> positions, so each "
    "backend placeholder covers just the soft tokens, while native vLLM's covers the whole "
    "expansion '\\n\\n<start_of_image>' + soft tokens + '<end_of_image>\\n\\n' with is_embed on "
    "the soft tokens. The embedding positions agree; offsets and lengths do not."
)
_SUBJECTS = ("vllm-backend", "impl")

def _structure_tokens_embedded(tokens: str, note: str = "") -> str:
    return (
        f"Legacy path: the processor's image_token_ids include {tokens}, and the backend takes "
        "every token among image_token_ids as an embedding position, so each item gets more "
        "embedding positions than the encoder produces rows (native vLLM embeds only the image "
        f"token itself).{note}"
    )


_INTERNVL_LEGACY = _structure_tokens_embedded(
    "'<img>' and '</img>'", " Shown by impl; vLLM's backend cannot reach it (its processor "
    "cannot be created, see the InternVL entry).")
_PIXTRAL_LEGACY = _structure_tokens_embedded("[IMG_BREAK] and [IMG_END]")
_AYA_LEGACY = _structure_tokens_embedded("the tile markers and <|START_OF_IMG|>/<|END_OF_IMG|>")
_TILE_PADDING = (
    "{name}'s image processor pads every image's tiles to the largest tile count in the batch "
    "(pixel_values [items, max_tiles, 3, h, w]); its image_sizes are the original sizes, not "
    "the padded trailing dimensions, so the backend does not unpad them and an image processed "
    "alone has fewer tile rows than inside a batch: its data, and what vLLM's processor cache "
    "stores under its hash, depend on its neighbours. Native vLLM's processor gives the same "
    "shapes."
)

_BARE_ASSERT = (
    "Offsets path: more items than placeholders is rejected only by a bare `assert` in vLLM's "
    "shared prompt-update code ('Failed to apply prompt replacement for mm_items[...]'; native "
    "vLLM raises the same), not by a ValueError naming the counts; under `python -O` the "
    "assert is stripped. impl mirrors it."
)

_SMOLVLM = (
    "SmolVLMProcessor defines no `_get_num_multimodal_tokens` (5.12.1 to 5.24.0), which the "
    "backend needs to size each image's rows (Offsets path: 'cannot be split into the [1, 1] "
    "row(s) per image') and to start the model; on the Legacy path its output has no "
    "mm_token_type_ids either. The backend cannot serve SmolVLM; native vLLM does. Without "
    "that count the HF oracle cannot cut the processor's marked tokens into items either."
)
_PALIGEMMA_OFFSETS = (
    "PaliGemma prompts hold no image token: the processor (and native vLLM) put the image "
    "tokens and BOS in front of the text itself. The backend's Offsets path only replaces image "
    "tokens present in the prompt, so it cannot place the image ('Failed to apply prompt "
    "replacement'); writing '<image>' into the prompt does not help either."
)
_PALIGEMMA_LEGACY = (
    "Legacy path, three differences: native vLLM's placeholder covers the image tokens and the "
    "BOS after them (length n+1, is_embed on the image tokens) while the backend's covers the "
    "image tokens only; the backend keeps the HF processor's ids, which differ from native "
    "vLLM's after the text; and the backend treats PaliGemma's text-dependent `labels` output "
    "as an image field, so an image's data (and hash) change with the prompt around it."
)

_GEMMA3N = (
    "Gemma3n: transformers 5.12.1's Gemma3nProcessor defines no `_get_num_multimodal_tokens` "
    "(the Legacy path needs it for images); the backend cannot start the model because "
    "Gemma3nAudioConfig names none of max_source_positions / max_position_embeddings / "
    "max_pos_emb ('Unable to get max input length'); from 5.15 the processor reports no "
    "text_replacement_offsets on 5.17.0; on 5.24.0 the backend's dummy text writes Gemma3's "
    "<start_of_image> for any processor whose name contains 'gemma3', which Gemma3nProcessor "
    "rejects (it now counts <image_soft_token>: 'Found total 0 <image_soft_token> tokens'; impl "
    "writes the same text); audio ranges cover only the soft tokens on the Legacy path (native: "
    "the whole '\\n\\n<start_of_audio>…<end_of_audio>\\n\\n') and newline runs are not "
    "re-merged on the Offsets path, as for Gemma3."
)
_NO_AUDIO_FEATURES = (
    "The backend encodes audio with `model.get_audio_features`, which transformers' "
    "Qwen2AudioModel does not define (5.12.1 to 5.24.0): neither the backend nor impl can "
    "embed Qwen2-Audio's audio. Native vLLM serves it."
)
_DEEPSTACK = (
    "Qwen3-VL: the backend keeps only the first output of get_image_features and drops the "
    "DeepStack features native vLLM appends to each image embedding (backend rows of width "
    "hidden_size vs native hidden_size x (1 + DeepStack levels)); native's first hidden_size "
    "columns equal the backend's."
)
_IDEFICS3_520 = (
    "Idefics3 on transformers 5.20.2 (upgrade candidate): the backend's image features for a "
    "batch of two images come back as one embedding, so vLLM cannot assign them to the two "
    "placeholders. Measured on 5.20.2; 5.17.0 passes."
)
_IDEFICS3_NO_SPLITTING = (
    "With do_image_splitting=False, Idefics3Processor._get_num_multimodal_tokens reports "
    "num_image_patches 0 for every image, although __call__ returns one row of pixel_values per "
    "image. The backend sizes each image's rows from that count: on the Offsets path its row "
    "check rejects every image request ('cannot be split into the [0] row(s) per image'); on the "
    "Legacy path nothing checks it, so every image's slice of pixel_values and "
    "pixel_attention_mask is empty (0 rows, shaped by the whole batch) and an item's data and "
    "hash depend on its neighbours. Native vLLM serves the option."
)
_GEMMA3_PAN_AND_SCAN = (
    "With do_pan_and_scan=True, Gemma3's processor adds each image's crops as extra rows of "
    "pixel_values, but _get_num_multimodal_tokens still reports one row per image, so the "
    "backend cannot attribute the rows (nor, on the Legacy path, the image tokens the crops "
    "add: 'holds 12 image token(s) but Gemma3Processor accounts for 4'). Usually it raises "
    "('cannot be split into the ... row(s) per image', the limitation its message names); but "
    "when the rows counted come to 3, its "
    "row-axis guess (axis 1 when axis 0 does not match the count) takes pixel_values' colour "
    "axis, so each image silently gets every crop in one colour channel. Native vLLM serves "
    "pan-and-scan."
)
_VOXTRAL = (
    "Voxtral (tekken.json tokenizer): vLLM refuses Mistral tokenizer files with "
    "tokenizer_mode='hf' below transformers 5.15.0; from 5.15 the backend cannot load the "
    "processor ('not supported by MistralCommonBackend.from_pretrained'), and VoxtralProcessor "
    "rejects text holding [AUDIO] (it requires apply_chat_template), so neither the backend nor "
    "the HF processor can expand a prompt with audio."
)

KNOWN: tuple[Known, ...] = (
    Known("gemma3n", "*", _GEMMA3N, subjects=_SUBJECTS,
          evidence=("_get_num_multimodal_tokens", "Unable to get max input length",
                    "returned no text replacement offsets", "no text_replacement_offsets",
                    "start_of_image", "Found total 0 <image_soft_token> tokens",
                    "expected offset=", "native offset=", "prompt ids differ",
                    "a bare assertion instead of a clear error")),
    *(Known(fixture, check, reason, evidence=evidence, min_version=since)
      for fixture, check, reason, evidence, since in (
          ("qwen2_audio", "encoder", _NO_AUDIO_FEATURES, "get_audio_features", "5.13.0"),
          ("qwen2_audio", "generate", _NO_AUDIO_FEATURES, "get_audio_features", "5.13.0"),
          ("qwen3_vl", "encoder", _DEEPSTACK, "shape (", None),
          ("idefics3", "encoder", _IDEFICS3_520, "gave 1 embedding(s)", "5.20.0"),
          ("idefics3", "generate", _IDEFICS3_520, "got len(mm_embeddings)=1", "5.20.0"),
          ("idefics3", "model", _IDEFICS3_520, "got len(mm_embeddings)=1", "5.20.0"),
      )),
    Known("voxtral", "*", _VOXTRAL, subjects=_SUBJECTS,
          evidence=("requires transformers>=5.15.0", "MistralCommonBackend",
                    "not supported by VoxtralProcessor", "apply_chat_template",
                    "Failed to load the processor")),
    Known("smolvlm", "*", _SMOLVLM, subjects=_SUBJECTS,
          evidence=("_get_num_multimodal_tokens", "row(s) of image data for",
                    "mm_token_type_ids", "items located, the processor expanded")),
    Known("paligemma", "*", _PALIGEMMA_OFFSETS,
          evidence=("Failed to apply prompt replacement", "no placeholder left for item"),
          min_version="5.15.0", subjects=_SUBJECTS),
    # Not the model checks: on the Legacy path the model itself loads and generates as native
    *(Known("paligemma", check, _PALIGEMMA_LEGACY, max_version="5.15.0", subjects=_SUBJECTS,
            evidence=("native offset=0 length=", "expected offset=0 length=",
                      "prompt ids differ", ".labels: shape", "the hash depends on its neighbours"))
      for check in ("processing", "prompt-ids", "placeholders", "embed-count", "cache", "slicing",
                    "errors")),
    Known("*", "cache",
          "Legacy path (transformers < 5.15.0): the backend's LegacyMultiModalProcessor "
          "overrides apply() and so bypasses vLLM's multimodal processor cache by design; a "
          "repeated request is processed again and the cache records no hit.",
          evidence="did not hit the processor cache", max_version="5.15.0",
          subjects=("vllm-backend",)),
    Known("*", "errors", _BARE_ASSERT, evidence="a bare assertion instead of a clear error",
          min_version="5.15.0", subjects=_SUBJECTS),
    Known("idefics3", "*", _IDEFICS3_NO_SPLITTING, options=("do_image_splitting",),
          subjects=_SUBJECTS,
          evidence=("[0] row(s) per image", "shape [0, ", "the hash depends on its neighbours")),
    Known("gemma3", "*", _GEMMA3_PAN_AND_SCAN, options=("do_pan_and_scan",), subjects=_SUBJECTS,
          evidence=("row(s) of image data for", "pixel_values: shape [1, 3,",
                    "but Gemma3Processor accounts for", "but Gemma3Processor reports",
                    "pixel_values: values differ", "the hash depends on its neighbours")),
    Known("internvl", "*",
          "vLLM's get_processor looks the checkpoint's processor_class ('InternVLProcessor') up "
          "in vllm.transformers_utils.processors first, where vLLM's own InternVLProcessor (for "
          "the remote-code InternVLChatModel) shadows transformers' class; it is built with the "
          "wrong arguments, so the backend cannot create its processor for any InternVL-hf "
          "checkpoint. Native vLLM names transformers' class explicitly and works.",
          evidence="missing 1 required keyword-only argument: 'image_seq_length'",
          subjects=("vllm-backend",)),
    *(Known(fixture, check, _TILE_PADDING.format(name=name), evidence=".pixel_values: shape",
            subjects=_SUBJECTS)
      for fixture, name in (("llava_next", "LlavaNext"), ("llava_onevision", "LlavaOnevision"))
      for check in ("cache", "slicing")),
    *(Known(fixture, "cache", _TILE_PADDING.format(name=name),
            evidence="the hash depends on its neighbours", subjects=("impl",))
      for fixture, name in (("llava_next", "LlavaNext"), ("llava_onevision", "LlavaOnevision"))),
    *(Known(fixture, check, reason, evidence=evidence, max_version="5.15.0")
      for fixture, reason in (("pixtral", _PIXTRAL_LEGACY), ("mistral3", _PIXTRAL_LEGACY),
                              ("aya_vision", _AYA_LEGACY))
      for check, evidence in (("processing", "embedding positions differ"),
                              ("model", "multimodal tokens to"),
                              ("generate", "multimodal tokens to"),
                              ("placeholders", "embedding positions differ"),
                              ("embed-count", "embedding positions but the encoder produces"))),
    *(Known("aya_vision", check,
            "Legacy path: the backend's placeholder is (first marked position, number of marked "
            "positions), but Aya Vision's processor leaves the '_N' after each tile marker "
            "('TILE_1': only 'TILE' is marked) unmarked inside an image's span, so with more "
            "than one tile the range ends that many tokens early and its is_embed mask is laid "
            "over the wrong positions after the first gap. Seen on the real profile (5.12.1: "
            "span 1204, backend length 1192); the HF oracle spans first to last marked token.",
            evidence="got offset=", max_version="5.15.0")
      for check in ("processing", "placeholders")),
    Known("internvl", "placeholders", _INTERNVL_LEGACY, evidence="embedding positions differ",
          max_version="5.15.0", subjects=("impl",)),
    Known("internvl", "embed-count", _INTERNVL_LEGACY,
          evidence="embedding positions but the encoder produces", max_version="5.15.0",
          subjects=("impl",)),
    Known("gemma3", "prompt-ids", _GEMMA3_NEWLINES, evidence="prompt ids differ",
          min_version="5.15.0", subjects=_SUBJECTS),
    Known("gemma3", "placeholders", _GEMMA3_NEWLINES, evidence="prompt ids differ",
          min_version="5.15.0", subjects=_SUBJECTS),
    Known("gemma3", "prompt-ids",
          "Legacy path: native vLLM's Gemma3 processor re-merges only newline pairs around an "
          "image ('\\n'+'\\n\\n', '\\n\\n'+'\\n', '\\n\\n'+'\\n\\n'), so a longer run "
          "(adjacent images, or a newline written beside one) stays split in native vLLM's ids, "
          "while the HF processor tokenizes the whole run as one piece, as the real Gemma "
          "vocabulary does. The backend takes the HF processor's ids on this path: it agrees "
          "with HF, and native vLLM is the outlier.",
          evidence="vs vllm-native: prompt ids differ", max_version="5.15.0", subjects=_SUBJECTS),
    Known("gemma3", "placeholders", _GEMMA3_LEGACY_RANGES, evidence="got offset=",
          max_version="5.15.0", subjects=_SUBJECTS),
    Known("gemma3", "processing", _GEMMA3_NEWLINES, evidence="prompt ids differ",
          min_version="5.15.0"),
    Known("gemma3", "processing", _GEMMA3_LEGACY_RANGES, evidence="native offset=",
          max_version="5.15.0"),
    Known("qwen2_audio", "errors",
          "Legacy path: transformers 5.12.1's Qwen2AudioProcessor wraps a bare <|AUDIO|> in "
          "<|audio_bos|>…<|audio_eos|> when it expands it, so adjacent bare audio tokens become "
          "separate runs: the backend accepts them without the adjacency error, with prompt ids "
          "unlike native vLLM's, which keeps the prompt's tokens as written.",
          evidence="adjacent audio placeholders on the Legacy path: accepted, but unlike native",
          max_version="5.15.0", subjects=_SUBJECTS),
    Known("qwen2_audio", "*", _QWEN2_AUDIO_NO_OFFSETS, min_version="5.15.0", max_version="5.17.0",
          evidence=("returned no text replacement offsets",
                    "reported no text_replacement_offsets")),
    *(Known("qwen2_audio", check,
            "The backend refuses audio models below transformers 5.13.0 ('requires "
            "transformers>=5.13.0 for audio models support'; impl mirrors it); native vLLM "
            "serves it.",
            evidence=("requires transformers>=5.13.0 for audio", "audio support needs "
                      "transformers>=5.13.0"), max_version="5.13.0")
      for check in ("model", "encoder", "generate")),
    *(Known(fixture, check,
            "With transformers 5.12.1 the backend cannot load a hub-layout Qwen-VL checkpoint: "
            "`model.embed_tokens.weight` is not mapped onto the HF model's "
            "`model.language_model.embed_tokens` ('There is no module or parameter named "
            "'embed_tokens' in TransformersMultiModalForCausalLM'). Measured on 5.12.1; 5.14.1 "
            "loads it. Native vLLM loads it on both.",
            evidence="no module or parameter named 'embed_tokens'", max_version="5.14.1")
      for fixture in ("qwen2_5_vl", "qwen2_vl")
      for check in ("model", "encoder", "mrope", "generate")),
    Known("qwen2_audio", "model",
          "The backend encodes audio with `model.get_audio_features`, which transformers' "
          "Qwen2AudioModel does not define (checked 5.12.1 to 5.24.0; its audio tower and "
          "projector are called inline in forward), so the backend cannot embed any audio of "
          "Qwen2-Audio. Native vLLM serves it.",
          evidence="has no attribute 'get_audio_features'", min_version="5.13.0"),
)


def known_reason(fixture: str, check: str, version: str, subject: str | None = None,
                 observed: str | None = None, options: tuple[str, ...] = ()) -> Known | None:
    """The entry for this cell; given the observed difference (and the processor options the
    failing case set), the one whose evidence it shows (None if no entry explains it)."""
    for entry in KNOWN:
        if entry.applies(fixture, check, version, subject) and set(entry.options) <= set(options):
            if observed is None or entry.shown_by(observed, options):
                return entry
    return None


def markdown_table() -> str:
    """The known incompatibilities, one row per entry (README's list is made from this)."""
    rows = ["| fixture | check | transformers | subjects | reason |", "|---|---|---|---|---|"]
    for entry in KNOWN:
        versions = f"{entry.min_version or ''}..{entry.max_version or ''}".strip(".") or "all"
        if versions != "all":
            versions = f">={entry.min_version}" if not entry.max_version else (
                f"<{entry.max_version}" if not entry.min_version
                else f">={entry.min_version}, <{entry.max_version}")
        subjects = ", ".join(entry.subjects) or "any"
        reason = " ".join(entry.reason.split()).replace("|", "\\|")
        fixture = entry.fixture + "".join(f" ({name})" for name in entry.options)
        rows.append(f"| {fixture} | {entry.check} | {versions} | {subjects} | {reason} |")
    return "\n".join(rows) + "\n"
