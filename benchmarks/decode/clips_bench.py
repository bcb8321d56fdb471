#!/usr/bin/env python3
"""Clips and windows (issue 38, acceptance 2): a 4-second clip at 2 fps from a long video, and a 30-second
window from a long FLAC, decoded by seeking (ours) against decoding the whole member and cutting.

Data (made once with ffmpeg under ``--workdir``): a ``--minutes`` (10) minute 1280x720 H.264 video at 30 fps
(testsrc, a keyframe every 2 s, as encoders default to) and a ``--audio-minutes`` (60) minute 16 kHz mono
FLAC. Each contender runs in a fresh process, ``--repeats`` (3) times alternated; reported: clips (or
windows) per second, best and median, and the process's peak RSS (``getrusage``) over the interpreter
with torch and torchcodec imported.

* ours: ``decode_clips`` / ``decode_windows`` (``streamer/decode/clipdecode.py``), ``where="random"``,
  a new key each clip;
* whole and cut: every frame decoded in order in chunks of 64 (memory bounded, as a careful pipeline
  would) keeping the clip's 8; every sample of the FLAC decoded, the window cut out.
* ``nolength-ours``: windows of the same FLAC written to a pipe (no length in its header), which
  ``decode_windows`` first scans a piece at a time (``--only nolength-ours,audio-whole`` runs just these).

* webdataset's approach: its video decoder (``autodecode.torch_video``) is ``torchvision.io.read_video``
  of the whole member, which torchvision 0.25+ no longer has (0.29 here; 0.24 needs the torch of its own
  release). Its PyAV path is reproduced (``--pyav DIR``: ``pip install --target DIR av``): every frame
  decoded to an RGB array, the arrays stacked into one tensor, the clip's frames taken from it. It holds
  every frame at once (a 10-minute 720p member is 18,000 x 2.8 MB = 50 GB, beyond this machine), so it
  runs on a ``--wds-seconds`` (30) second cut of the same video, beside ours on that cut.

    .venv/bin/python benchmarks/decode/clips_bench.py          # ~5 minutes the first time (encoding)
    .venv/bin/python benchmarks/decode/clips_bench.py --no-save

Results: markdown on stdout and ``benchmarks/results/clips-<date>.{md,json}``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # benchmarks/decode/<this> -> the repository
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # the shared harness package

from harness import RESULTS  # noqa: E402
from harness.report import save_results  # noqa: E402

CLIPS = 4  # clips (or windows) each run of ours decodes, each at another random start (whole: 1)


def make_data(root: Path, minutes: int, audio_minutes: int, short: int) -> tuple[Path, Path, Path, Path]:
    root.mkdir(parents=True, exist_ok=True)
    video, audio = root / f"video-{minutes}m.mp4", root / f"audio-{audio_minutes}m.flac"
    cut = root / f"video-{short}s.mp4"
    if not video.exists():
        source = f"testsrc=size=1280x720:rate=30:duration={minutes * 60}"
        encode = ["-c:v", "libx264", "-preset", "ultrafast", "-g", "60", "-pix_fmt", "yuv420p"]
        command = ["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", source, *encode]
        subprocess.run([*command, "-movflags", "+faststart", str(video)], check=True)
    if not audio.exists():
        source = f"sine=frequency=440:sample_rate=16000:duration={audio_minutes * 60}"
        command = ["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", source, "-ac", "1"]
        subprocess.run([*command, str(audio)], check=True)
    if not cut.exists():  # the first seconds of the same video, its packets copied
        command = ["ffmpeg", "-v", "error", "-y", "-i", str(video), "-t", str(short), "-c", "copy"]
        subprocess.run([*command, "-movflags", "+faststart", str(cut)], check=True)
    piped = root / f"audio-{audio_minutes}m-nolength.flac"
    if not piped.exists():  # the same FLAC written to a pipe: no length in its header
        command = ["ffmpeg", "-v", "error", "-i", str(audio), "-f", "flac", "-"]
        piped.write_bytes(subprocess.run(command, capture_output=True, check=True).stdout)
    return video, audio, cut, piped


def child(kind: str, path: str) -> dict:
    """Run in a fresh process: ``CLIPS`` clips or windows one way, the seconds and the peak RSS."""
    import torch
    from torchcodec.decoders import AudioDecoder, VideoDecoder

    from streamer.decode.clipdecode import decode_clips, decode_windows
    from streamer.decode.clips import ClipOptions, WindowOptions, clip_times, starts

    data = Path(path).read_bytes()
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    clip, window = ClipOptions(seconds=4, fps=2), WindowOptions(seconds=30)
    count = (
        1 if kind.endswith(("whole", "wds")) else CLIPS
    )  # a whole decode of a long member is one clip's worth
    started = time.perf_counter()
    for i in range(count):
        key = f"member-{i}"
        if kind in ("video-ours", "short-ours"):
            decode_clips(data, clip, key=key)
        elif kind in ("audio-ours", "nolength-ours"):
            decode_windows(data, window, key=key)
        elif kind == "video-whole":
            decoder = VideoDecoder(data)
            meta = decoder.metadata
            first = starts(meta.duration_seconds, 4, 1, "random", seed=0, epoch=0, key=key)[0]
            wanted = [round(t * meta.average_fps) for t in clip_times(first, clip, meta.duration_seconds)]
            kept = []
            for chunk in range(0, meta.num_frames, 64):  # every frame decoded, in order
                frames = decoder.get_frames_in_range(chunk, min(chunk + 64, meta.num_frames)).data
                kept += [frames[n - chunk] for n in wanted if chunk <= n < chunk + 64]
            torch.stack(kept)
        elif kind == "short-wds":
            whole_then_cut(data, clip, key)
        else:  # audio-whole
            samples = AudioDecoder(data).get_all_samples()
            first = starts(samples.duration_seconds, 30, 1, "random", seed=0, epoch=0, key=key)[0]
            begin = round(first * samples.sample_rate)
            samples.data[:, begin : begin + 30 * samples.sample_rate].clone()
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"seconds": seconds, "per_second": count / seconds, "rss_mb": peak / 1024, "base_mb": base / 1024}


def whole_then_cut(data: bytes, clip, key: str):
    """torchvision's ``read_video`` (PyAV path), as webdataset's ``torch_video`` calls it: every frame to
    an RGB array, stacked into one [T, H, W, C] tensor; then the clip's frames by their times."""
    import io

    import av
    import numpy as np
    import torch

    from streamer.decode.clips import clip_times, starts

    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.video[0]
        frames, pts = [], []
        for frame in container.decode(stream):
            frames.append(frame.to_ndarray(format="rgb24"))
            pts.append(float(frame.pts * stream.time_base))
    video = torch.as_tensor(np.stack(frames))
    del frames
    duration = pts[-1] + (pts[-1] - pts[-2] if len(pts) > 1 else 0.0)
    first = starts(duration, clip.seconds, 1, "random", seed=0, epoch=0, key=key)[0]
    at = [
        max(0, int(np.searchsorted(pts, t + 1e-9, side="right")) - 1)
        for t in clip_times(first, clip, duration)
    ]
    return video[at].clone()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument("--audio-minutes", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", default="/tmp/shardstream-clips-bench")
    parser.add_argument("--wds-seconds", type=int, default=30, help="webdataset's approach: this long a cut")
    parser.add_argument("--pyav", default="/work/venvs/pyav", help="a folder holding PyAV (pip --target)")
    parser.add_argument("--only", help="these contenders (comma-separated), results named after them")
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    video, audio, cut, piped = make_data(
        Path(args.workdir), args.minutes, args.audio_minutes, args.wds_seconds
    )
    kinds = {"video-ours": video, "video-whole": video, "audio-ours": audio, "audio-whole": audio}
    kinds["nolength-ours"] = piped
    pyav = Path(args.pyav)
    if (pyav / "av").is_dir():
        kinds.update({"short-ours": cut, "short-wds": cut})
    else:
        print(f"no PyAV under {pyav} (pip install --target {pyav} av): webdataset's approach not run")
    if args.only:
        kinds = {kind: path for kind, path in kinds.items() if kind in args.only.split(",")}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(pyav), os.environ.get("PYTHONPATH", "")]))
    runs: dict[str, list[dict]] = {kind: [] for kind in kinds}
    for _ in range(args.repeats):
        for kind, path in kinds.items():
            command = [sys.executable, __file__, "--child", kind, str(path)]
            out = subprocess.run(command, capture_output=True, text=True, check=True, env=env).stdout
            runs[kind].append(json.loads(out))
    frames = args.minutes * 60 * 30
    lines = [
        f"# Clips and windows ({datetime.date.today()})",
        "",
        f"{CLIPS} random 4-second clips at 2 fps (whole and cut: 1) from a {args.minutes}-minute "
        "1280x720 H.264 video (30 fps, "
        f"a keyframe every 2 s); {CLIPS} random 30-second windows from a {args.audio_minutes}-minute 16 kHz "
        f"FLAC; fresh processes, {args.repeats} rounds alternated",
        "",
        "| contender | per second (best) | per second (median) | peak RSS over the start (MB) |",
        "|---|---|---|---|",
    ]
    for kind, rs in runs.items():
        rates = [r["per_second"] for r in rs]
        rss = statistics.median(r["rss_mb"] - r["base_mb"] for r in rs)
        lines.append(f"| {kind} | {max(rates):,.2f} | {statistics.median(rates):,.2f} | {rss:,.0f} |")
    if "video-ours" in runs and "video-whole" in runs:
        ours, whole = (
            statistics.median(r["per_second"] for r in runs[k]) for k in ("video-ours", "video-whole")
        )
        lines += [
            "",
            f"Video: ours {ours / whole:,.0f}x whole-and-cut (medians). webdataset's approach holds the "
            f"whole member: {frames:,} frames x 1280 x 720 x 3 bytes = "
            f"{frames * 1280 * 720 * 3 / 1e9:,.0f} GB for the {args.minutes}-minute one, not run on it.",
        ]
    if "nolength-ours" in runs:
        lines.append(
            "`nolength-ours`: the same FLAC written to a pipe, with no length in its header: each sample's "
            "windows first decode the member a piece at a time to learn its length (`scanned_seconds`), "
            "so it costs a whole decode's time with one piece's memory."
        )
    if "short-wds" in runs:
        short, wds = (
            statistics.median(r["per_second"] for r in runs[k]) for k in ("short-ours", "short-wds")
        )
        rss = {
            k: statistics.median(r["rss_mb"] - r["base_mb"] for r in runs[k])
            for k in ("short-ours", "short-wds")
        }
        lines.append(
            f"On the {args.wds_seconds}-second cut (`short-*`): ours {short / wds:,.0f}x webdataset's "
            "approach (torchvision read_video's PyAV path, reproduced), peak RSS "
            f"+{rss['short-ours']:,.0f} MB against +{rss['short-wds']:,.0f} MB; that approach's memory "
            "grows with the member's length, ours with the clip's."
        )
    report = "\n".join(lines) + "\n"
    print(report)
    # a partial run is named after its contenders' kinds: clips-audio-nolength-<date>
    name = "-".join(["clips", *sorted({k.split("-")[0] for k in kinds})]) if args.only else "clips"
    if not args.no_save:
        save_results(
            RESULTS, f"{name}-{datetime.date.today()}", {"args": vars(args), "runs": runs}, report, print
        )


if __name__ == "__main__":
    main()
