"""Decoding the clips and windows ``clips.py`` plans, with torchcodec's seeking: never the whole member.

``decode_clips`` returns ``{"frames": uint8 [clips, T, C, H, W], "pts": float64 [clips, T] (the
seconds each frame is played at), "starts": [clips]}``; ``decode_windows`` returns ``{"audio": float32
[windows, channels, samples], "rate": int, "starts": [windows]}``. A member with no frames or no audio
raises ``ValueError`` (the sample's error policy counts it). Trade-off: one decoder per member per call,
opened from the member's bytes (the container's index read again for each sample); audio whose header
has no length is decoded once, a piece at a time, to learn it (``scanned_seconds``).
"""

from __future__ import annotations

from typing import Any

import torch

from .clips import ClipOptions, WindowOptions, clip_times, starts

AUDIO_SLACK = 0.1  # seconds asked for past a window's end, then cut to its length
SCAN_SECONDS = 60.0  # what a headerless member's length is decoded in: none kept, memory for 60 s


def decode_clips(data: bytes, options: ClipOptions, *, seed: int = 0, epoch: int = 0, key: str = "") -> dict:
    """``options.clips`` clips of the video in ``data`` (see the module)."""
    from torchcodec.decoders import VideoDecoder

    decoder = VideoDecoder(data, seek_mode=options.seek_mode)
    meta = decoder.metadata
    begin = float(meta.begin_stream_seconds or 0.0)
    end = meta.end_stream_seconds
    if end is None or not meta.num_frames:
        raise ValueError("the video has no frames to take a clip from")
    end = float(end)
    duration = end - begin
    fps = float(meta.average_fps or options.fps)
    last = max(end - 0.5 / fps, begin)  # within the last frame's display time, never at its end
    firsts = starts(duration, options.seconds, options.clips, options.where, seed=seed, epoch=epoch, key=key)
    times = [t + begin for s in firsts for t in clip_times(s, options, duration, last - begin)]
    batch = decoder.get_frames_played_at(seconds=times)
    frames = batch.data.reshape(options.clips, options.frames, *batch.data.shape[1:])
    if options.size is not None and tuple(frames.shape[-2:]) != options.size:
        frames = _resized(frames, options.size)
    pts = batch.pts_seconds.to(torch.float64).reshape(options.clips, options.frames)
    return {"frames": frames, "pts": pts, "starts": torch.tensor(firsts, dtype=torch.float64)}


def _resized(frames: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    flat = frames.flatten(0, 1).to(torch.float32)
    out = torch.nn.functional.interpolate(
        flat, size=size, mode="bilinear", antialias=True, align_corners=False
    )
    return out.round_().clamp_(0, 255).to(torch.uint8).reshape(*frames.shape[:3], *size)


def decode_windows(
    data: bytes, options: WindowOptions, *, seed: int = 0, epoch: int = 0, key: str = ""
) -> dict[str, Any]:
    """``options.windows`` windows of the audio in ``data`` (see the module)."""
    from torchcodec.decoders import AudioDecoder

    decoder = AudioDecoder(data, sample_rate=options.rate, num_channels=1 if options.mono else None)
    meta = decoder.metadata
    rate = int(options.rate or meta.sample_rate)
    duration = meta.duration_seconds_from_header
    if duration is None:  # no duration in the header (a FLAC written to a pipe): decode it once to know
        duration = scanned_seconds(decoder)
    if not duration or duration <= 0:
        raise ValueError("the audio has no samples to take a window from")
    length = max(1, round(options.seconds * rate))
    firsts = starts(
        duration, options.seconds, options.windows, options.where, seed=seed, epoch=epoch, key=key
    )
    out = []
    for start in firsts:
        # A little past the end: a codec of frames (MP3: 1,152 samples) gives only whole ones inside it
        stop = min(start + options.seconds + AUDIO_SLACK, duration)
        samples = decoder.get_samples_played_in_range(start_seconds=start, stop_seconds=stop).data
        if samples.shape[-1] < length:  # a member shorter than the window: zeros after it
            samples = torch.nn.functional.pad(samples, (0, length - samples.shape[-1]))
        out.append(samples[..., :length])
    return {"audio": torch.stack(out), "rate": rate, "starts": torch.tensor(firsts, dtype=torch.float64)}


def scanned_seconds(decoder: Any) -> float:
    """An audio decoder's length in seconds, decoded ``SCAN_SECONDS`` at a time, none kept: the time of a
    whole decode (its header has no length), the memory of one piece (a 60-minute 16 kHz FLAC: +33 MB
    against +500 MB for a whole decode, ``results/clips-audio-nolength-2026-12-07.md``). Asking past
    the end raises in torchcodec: a member whose length is a whole number of pieces ends there."""
    start, played = 0.0, decoder.get_samples_played_in_range
    while True:
        try:
            piece = played(start_seconds=start, stop_seconds=start + SCAN_SECONDS)
        except RuntimeError:
            if start == 0.0:
                raise
            return start
        end = piece.pts_seconds + piece.data.shape[-1] / piece.sample_rate
        if end < start + SCAN_SECONDS - 1e-6:
            return end
        start = end
