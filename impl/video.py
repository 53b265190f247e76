"""Videos on their way to the HF processor, from vLLM 0.32.0 on (`VIDEO`): an item is its
frames, or (frames, metadata) as vLLM's `multi_modal_data` gives it; the metadata goes along
only where the video processor samples frames (`impl.info.video_needs_metadata`)."""

from __future__ import annotations

from typing import Any

import numpy as np


def normalise_video(item: Any, needs_metadata: bool) -> Any:
    """A video as the backend keeps it: its frames (a bare list of frames made one array; a
    (frames, metadata) pair is taken as it is), with its metadata only where the video
    processor reads it (`video_needs_metadata`), which the item then has to carry."""
    if isinstance(item, tuple):
        frames, metadata = item
    else:
        frames, metadata = (np.array(item) if isinstance(item, list) else item), None
    if not needs_metadata:
        return frames
    if metadata is None:
        raise ValueError("this model's video processor samples frames, so each video needs its "
                         "metadata: give it as (frames, metadata)")
    return frames, metadata


def split_video_metadata(data: dict[str, Any]) -> dict[str, Any]:
    """Videos given as (frames, metadata) become frames under `videos` and the metadata under
    `video_metadata`, less `do_sample_frames`, which the processor takes once per call: it is
    returned as a call option, and the videos of a call must agree on it."""
    videos = data.get("videos")
    if not videos or not isinstance(videos[0], tuple):
        return {}
    frames, metadata = zip(*videos, strict=True)
    data["videos"] = list(frames)
    data["video_metadata"] = [{k: v for k, v in m.items() if k != "do_sample_frames"}
                              for m in metadata]
    sampling = {m.get("do_sample_frames", False) for m in metadata}
    if len(sampling) > 1:
        raise ValueError("videos processed together must agree on do_sample_frames: the HF "
                         "processor takes one value for the whole call")
    return {"do_sample_frames": sampling.pop()}
