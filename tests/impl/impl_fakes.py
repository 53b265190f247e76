"""Tiny stand-ins for HF tokenizers and processors, enough to drive `impl` end to end."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image

BOS = "<s>"
SPECIALS = (BOS, "<image>", "<audio>", "<boi>", "<eoi>", "<pad>")


class FakeTokenizer:
    """Greedy longest-match over a small vocabulary; any other character is its own token."""

    def __init__(self, pieces: Sequence[str] = (), specials: Sequence[str] = SPECIALS) -> None:
        self.vocab: dict[str, int] = {}
        for piece in (*specials, *pieces):
            self.vocab.setdefault(piece, len(self.vocab))
        self.bos_id = self.vocab[BOS]
        self.pieces = sorted(self.vocab, key=len, reverse=True)
        self.calls: list[tuple[str, bool]] = []

    def get_vocab(self) -> dict[str, int]:
        return dict(self.vocab)

    def token_id(self, piece: str) -> int:
        return self.vocab[piece]

    def encode(self, text: str, add_special_tokens: bool = True, **_: Any) -> list[int]:
        self.calls.append((text, add_special_tokens))
        ids = [self.bos_id] if add_special_tokens else []
        index = 0
        while index < len(text):
            piece = next((p for p in self.pieces if text.startswith(p, index)), None)
            if piece is None:
                ids.append(1000 + ord(text[index]))
                index += 1
            else:
                ids.append(self.vocab[piece])
                index += len(piece)
        return ids

    def decode(self, ids: Sequence[int], **_: Any) -> str:
        inverse = {v: k for k, v in self.vocab.items()}
        return "".join(inverse[i] if i in inverse else chr(i - 1000) for i in ids)


def make_image(height: int, width: int, value: int = 1) -> Image.Image:
    """A flat RGB image; `value` tells images apart in the processed pixels."""
    return Image.new("RGB", (width, height), color=(value, value, value))


class FakeImageProcessor:
    model_input_names = ["pixel_values", "image_sizes"]


class FakeAudioProcessor:
    model_input_names = ["input_features"]
    sampling_rate = 16000
    chunk_length = 2


class FakeProcessor:
    """Images: one `<image>` token per 100 pixels, wrapped in `<boi>`/`<eoi>`, pixel values
    padded to the largest image. Audios: one `<audio>` per 100 samples, features padded to the
    longest audio."""

    image_token = "<image>"
    audio_token = "<audio>"

    def __init__(
        self,
        tokenizer: FakeTokenizer | None = None,
        *,
        image: bool = True,
        audio: bool = False,
        wrap: bool = True,
        offsets: bool = True,
        reject_bare_placeholders: bool = False,
    ) -> None:
        self.tokenizer = tokenizer or FakeTokenizer()
        if image:
            self.image_processor = FakeImageProcessor()
        if audio:
            self.feature_extractor = FakeAudioProcessor()
        self.wrap = wrap
        self.offsets = offsets
        self.reject_bare_placeholders = reject_bare_placeholders
        self.image_token_id = self.tokenizer.token_id("<image>")
        self.calls: list[dict[str, Any]] = []

    # token counting, as transformers' `_get_num_multimodal_tokens`
    def image_tokens(self, height: int, width: int) -> int:
        return height * width // 100

    def _get_num_multimodal_tokens(self, image_sizes: Sequence[Sequence[int]], **_: Any) -> dict:
        tokens = [self.image_tokens(h, w) + (2 if self.wrap else 0) for h, w in image_sizes]
        return {"num_image_tokens": tokens, "num_image_patches": [1] * len(tokens)}

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(ids)

    def image_replacement(self, image: Image.Image) -> str:
        body = self.image_token * self.image_tokens(image.height, image.width)
        return f"<boi>{body}<eoi>" if self.wrap else body

    def audio_replacement(self, audio: np.ndarray) -> str:
        return self.audio_token * (len(audio) // 100)

    def __call__(
        self,
        text: str | None = None,
        images: list[Image.Image] | None = None,
        audio: list[np.ndarray] | None = None,
        return_tensors: str | None = None,
        return_text_replacement_offsets: bool = False,
        return_mm_token_type_ids: bool = False,
        add_special_tokens: bool = True,
        **kwargs: Any,
    ) -> dict[str, Any]:
        self.calls.append(
            dict(text=text, images=images, audio=audio, add_special_tokens=add_special_tokens,
                 **kwargs)
        )
        replacements = {
            "image": [self.image_replacement(i) for i in images or []],
            "audio": [self.audio_replacement(a) for a in audio or []],
            "video": [self.video_replacement(v) for v in kwargs.get("videos") or []],
        }
        tokens = {"image": self.image_token, "audio": self.audio_token,
                  "video": getattr(self, "video_token", "")}
        active = [m for m in ("image", "audio", "video") if replacements[m]]
        if self.reject_bare_placeholders and not active:
            if any(token in (text or "") for token in tokens.values()):
                raise ValueError("placeholders without media")
        pattern = "|".join(f"(?P<{m}>{re.escape(tokens[m])})" for m in active) or r"(?!)"
        iters = {m: iter(replacements[m]) for m in active}
        entries, pieces, last = [], [], 0
        for match in re.finditer(pattern, text or ""):
            replacement = next(iters[match.lastgroup])
            entries.append({"type": match.lastgroup, "replacement": replacement})
            pieces += [text[last : match.start()], replacement]
            last = match.end()
        expanded = "".join(pieces) + (text or "")[last:]
        ids = self.tokenizer.encode(expanded, add_special_tokens=add_special_tokens)
        out: dict[str, Any] = {
            "input_ids": torch.tensor([ids]),
            "attention_mask": torch.ones(1, len(ids), dtype=torch.long),
        }
        if return_mm_token_type_ids:
            image_ids = {self.tokenizer.token_id(t) for t in ("<image>", "<boi>", "<eoi>")}
            audio_id = self.tokenizer.token_id("<audio>")
            types = [1 if t in image_ids else 3 if t == audio_id else 0 for t in ids]
            out["mm_token_type_ids"] = torch.tensor([types])
        if return_text_replacement_offsets and self.offsets:
            out["text_replacement_offsets"] = [entries]
        if images:
            out.update(pad_images(images))
        if audio:
            out["input_features"] = pad_audios(audio)
        return out


def pad_images(images: Sequence[Image.Image]) -> dict[str, torch.Tensor]:
    height = max(i.height for i in images)
    width = max(i.width for i in images)
    pixels = torch.zeros(len(images), 3, height, width)
    for index, image in enumerate(images):
        array = torch.from_numpy(np.asarray(image, dtype=np.float32)).permute(2, 0, 1)
        pixels[index, :, : image.height, : image.width] = array
    sizes = torch.tensor([[i.height, i.width] for i in images])
    return {"pixel_values": pixels, "image_sizes": sizes}


def pad_audios(audios: Sequence[np.ndarray]) -> torch.Tensor:
    """Two feature rows per audio, one frame per 100 samples, zero-padded to the longest."""
    frames = max(len(a) // 100 for a in audios)
    features = torch.zeros(len(audios), 2, frames)
    for index, audio in enumerate(audios):
        n = len(audio) // 100
        features[index, :, :n] = torch.as_tensor(audio[: n * 100 : 100], dtype=torch.float32)
    return features


def audio(seconds_in_hundreds: int, value: float = 0.5) -> np.ndarray:
    return np.full(seconds_in_hundreds * 100, value, dtype=np.float32)


class GridProcessor(FakeProcessor):
    """Qwen2-VL style: patch rows of all images concatenated, described by `image_grid_thw`."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        out = super().__call__(*args, **kwargs)
        if "pixel_values" in out:
            images = kwargs.get("images") or []
            rows = [self.image_tokens(i.height, i.width) for i in images]
            out["pixel_values"] = torch.cat(
                [torch.full((n, 4), float(index)) for index, n in enumerate(rows)]
            )
            out["image_grid_thw"] = torch.tensor([[1, 1, n] for n in rows])
            del out["image_sizes"]
        return out


class BatchDimProcessor(FakeProcessor):
    """Idefics3 style: image fields carry a leading batch dimension of one."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        out = super().__call__(*args, **kwargs)
        if "pixel_values" in out:
            out["pixel_values"] = out["pixel_values"][None]
            out["pixel_attention_mask"] = torch.ones(out["pixel_values"].shape[:2])
            del out["image_sizes"]
        return out


class CroppingProcessor(FakeProcessor):
    """Gemma3 pan-and-scan style: more image rows than the per-image counts account for."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        out = super().__call__(*args, **kwargs)
        if "pixel_values" in out:
            out["pixel_values"] = torch.cat([out["pixel_values"]] * 2)
            del out["image_sizes"]
        return out


class MaskedAudioProcessor(FakeProcessor):
    """Audio features with an undeclared companion mask and an output nobody claims."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        out = super().__call__(*args, **kwargs)
        if "input_features" in out:
            out["input_features_mask"] = (out["input_features"][:, 0] != 0).long()
            out["stray"] = torch.zeros(len(out["input_features"]))
        return out


class FakeVideoSubProcessor:
    model_input_names = ["pixel_values_videos", "video_grid_thw"]
    temporal_patch_size = 2
    fps = 2.0

    def __init__(self, sample_frames: bool = False, size: dict | None = None) -> None:
        self.do_sample_frames = sample_frames
        self.size = size or {}


class FakeVideoProcessor(FakeProcessor):
    """Images as FakeProcessor; videos (frames x h x w x 3) as Qwen2-VL lays them out: per
    video a grid (frames // 2, 1, 2) of patch rows, and one `<video>` per 2 rows. `layout`:
    "flat" (a row per patch), "batched" (one row per video) or "tokens" (a row per token)
    for `pixel_values_videos`; `counts`: whether `_get_num_multimodal_tokens` counts video
    (`None`: it names no count, `False`: it cannot count video at all)."""

    video_token = "<video>"

    def __init__(self, *, layout: str = "flat", counts: bool | None = True,
                 sample_frames: bool = False, size: dict | None = None, max_side: int = 112,
                 **options: Any) -> None:
        options.setdefault("tokenizer", FakeTokenizer(pieces=("<video>",)))
        super().__init__(**options)
        self.video_processor = FakeVideoSubProcessor(sample_frames, size)
        self.layout = layout
        self.counts = counts
        self.max_side = max_side

    def grid(self, frames: int, height: int, width: int) -> tuple[int, int, int]:
        height, width = min(height, self.max_side), min(width, self.max_side)
        return max(frames // 2, 1), max(height // 28, 1), max(width // 28, 1)

    def _get_num_multimodal_tokens(self, image_sizes=None, video_sizes=None, **kwargs) -> dict:
        out = super()._get_num_multimodal_tokens(image_sizes or [], **kwargs)
        if video_sizes is not None:
            if self.counts is False:
                raise AttributeError("no video counting")
            grids = [self.grid(*size) for size in video_sizes]
            out["num_video_tokens"] = (
                [t * h * w for t, h, w in grids] if self.counts else None)
        return out

    def video_replacement(self, video: np.ndarray) -> str:
        t, h, w = self.grid(*video.shape[:3])
        return self.video_token * (t * h * w)

    def __call__(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        out = super().__call__(*args, **kwargs)
        videos = kwargs.get("videos") or []
        if videos:
            grids = [self.grid(*v.shape[:3]) for v in videos]
            rows = [t * h * w for t, h, w in grids]
            values = [float(v.reshape(-1)[0]) for v in videos]
            pixels = torch.cat([torch.full((n, 3), value) for n, value in zip(
                rows, values, strict=True)])
            if self.layout == "batched":
                pixels = torch.tensor([[value] for value in values])
            elif self.layout == "odd":
                pixels = torch.cat([pixels, pixels[:1]])
            out["pixel_values_videos"] = pixels
            if self.layout != "tokens":
                out["video_grid_thw"] = torch.tensor(grids)
            out["second_per_grid_ts"] = torch.tensor([1.0] * len(videos))
        return out


def make_video(frames: int, height: int, width: int, value: int = 1) -> np.ndarray:
    return np.full((frames, height, width, 3), value, dtype=np.uint8)
