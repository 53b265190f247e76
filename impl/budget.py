"""The largest input the backend profiles with, from vLLM 0.32.0 on (`IMAGE_BUDGET`, `VIDEO`).

Before 0.32.0 an image of 10000x10000 stood for "the largest image". From 0.32.0 the backend
reads candidate sizes off the sub-processor's `size` bound, counts each candidate's tokens
beside that huge fallback, and keeps the smallest size found with the most tokens: a bounded
processor is then profiled on an input of its own bound rather than a huge one. Videos are
sized the same way per frame, for a number of frames chosen against the sequence length.

Sizes are (width, height) pairs, as `impl.info.LARGEST_IMAGE_SIZE` is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

Size = tuple[int, int]  # (width, height)

# Far beyond any real input, so only the processor's own resizing bounds it; goes last so a
# candidate of as many tokens wins the tie
MAX_DUMMY_SIDE = 10_000
# Halving stops above this: processors guess the channel axis wrong on tiny inputs
MIN_DUMMY_SIDE = 224
# Frames per profiled video at most: past this a processor's pixel budget only shrinks frames
MAX_FRAMES_PER_VIDEO = 16


def size_candidates(sub_processor: Any, divisors: tuple[int, ...]) -> list[Size]:
    """Sizes the sub-processor's `size` bound names.

    An exact bound (height and width, or their max_ forms) is one candidate. An area bound
    (`max_pixels`, or `longest_edge` read as the area Qwen and GLM use it for) is split over
    each of `divisors` items into a square side each. A `shortest_edge` bound only limits the
    small side, so it names no candidate; neither does a processor with no `size`.
    """
    size = getattr(sub_processor, "size", None) or {}
    height = size.get("height", size.get("max_height"))
    width = size.get("width", size.get("max_width"))
    if height and width:
        return [(width, height)]
    area = size.get("max_pixels", size.get("longest_edge"))
    if not area:
        return []
    sides = sorted({math.isqrt(area // divisor) for divisor in divisors})
    return [(side, side) for side in sides if side]


def size_with_most_tokens(candidates: list[Size], count: Callable[[Size], int]) -> Size:
    """The first size (candidates in order, the huge fallback last) with the most tokens, then
    halved on both sides as long as the count holds and the smaller side stays at least
    MIN_DUMMY_SIDE.

    The count decides, not the bound: resize rounding may give a bigger input fewer tokens
    (Qwen2.5-VL), and tiling processors have no bound the candidates could read.
    """
    sizes = [*candidates, (MAX_DUMMY_SIDE, MAX_DUMMY_SIDE)]
    counts = [count(size) for size in sizes]
    most = max(counts)
    width, height = sizes[counts.index(most)]
    while min(width, height) // 2 >= MIN_DUMMY_SIDE:
        half = (width // 2, height // 2)
        if count(half) < most:
            break
        width, height = half
    return width, height


def count_tokens(processor: Any, kwargs: Mapping[str, Any] | None, **sizes: Any) -> Any:
    """The processor's token counts for `sizes`, under the model-level options only (the
    backend counts with the deployment's `mm_processor_kwargs`, never a request's)."""
    return processor._get_num_multimodal_tokens(**sizes, **dict(kwargs or {}))


def image_tokens(processor: Any, kwargs: Mapping[str, Any] | None, size: Size) -> int:
    width, height = size
    return count_tokens(processor, kwargs, image_sizes=([height, width],))["num_image_tokens"][0]


def video_tokens(processor: Any, kwargs: Mapping[str, Any] | None, num_frames: int,
                 size: Size) -> int:
    width, height = size
    counts = count_tokens(processor, kwargs, video_sizes=([num_frames, height, width],))
    return counts["num_video_tokens"][0]


def image_size_with_most_features(processor: Any, kwargs: Mapping[str, Any] | None) -> Size:
    """The image size the backend profiles with: candidates from the image processor's `size`
    (the whole area on one image)."""
    return size_with_most_tokens(
        size_candidates(processor.image_processor, (1,)),
        lambda size: image_tokens(processor, kwargs, size),
    )


def min_video_frames(processor: Any) -> int:
    """Frames the video processor groups into one temporal patch; one if it groups none."""
    return getattr(processor.video_processor, "temporal_patch_size", 1)


def video_size_with_most_features(processor: Any, kwargs: Mapping[str, Any] | None,
                                  num_frames: int) -> Size:
    """The frame size the backend profiles a video of `num_frames` with. The video processor's
    `size` budget may be per video, per temporal patch or per frame: all three are tried."""
    grid_t = max(num_frames // min_video_frames(processor), 1)
    return size_with_most_tokens(
        size_candidates(processor.video_processor, (num_frames, grid_t, 1)),
        lambda size: video_tokens(processor, kwargs, num_frames, size),
    )


def max_video_tokens_for_frames(processor: Any, kwargs: Mapping[str, Any] | None,
                                num_frames: int) -> int:
    size = video_size_with_most_features(processor, kwargs, num_frames)
    return video_tokens(processor, kwargs, num_frames, size)


def num_frames_with_most_features(processor: Any, kwargs: Mapping[str, Any] | None,
                                  seq_len: int, mm_counts: Mapping[str, int]) -> int:
    """Frames per profiled video: grown one temporal patch at a time, up to
    MAX_FRAMES_PER_VIDEO, while that many videos of the next size still fit in `seq_len`."""
    videos = max(mm_counts.get("video", 0), 1)
    step = min_video_frames(processor)
    frames = step
    while (frames + step <= MAX_FRAMES_PER_VIDEO
           and max_video_tokens_for_frames(processor, kwargs, frames + step) * videos <= seq_len):
        frames += step
    return frames


def max_video_tokens(processor: Any, kwargs: Mapping[str, Any] | None, seq_len: int,
                     mm_counts: Mapping[str, int]) -> int:
    frames = num_frames_with_most_features(processor, kwargs, seq_len, mm_counts)
    return max_video_tokens_for_frames(processor, kwargs, frames)
