"""A built-in cost for multimodal records (``--cost @estimate``): text tokens from characters plus a fixed
count per image, read from the sample's members; a rough count for budgets, not a tokenizer's.

``@estimate`` alone uses the defaults; ``@estimate:chars_per_token=3.5,image_tokens=729`` sets them:

- ``chars_per_token`` (4): characters per text token, over every string of the JSON record (nested ones
  too, as LLaVA's ``conversations`` are) and every ``.txt`` member;
- ``image_tokens`` (576: a 336-pixel image in 14-pixel patches, LLaVA-1.5): tokens per image member;
- ``video_tokens`` (0) and ``audio_tokens`` (0): per video or audio member, whatever its length;
- ``video_second_tokens`` (0) and ``audio_second_tokens`` (0): per second of each video or audio member,
  its duration read from the container's header (``shardstream.mediaprobe``: torchcodec, no frame
  decoded; e.g. 2 frames a second x 64 tokens a frame = 128). A member whose header gives no duration
  makes the sample a ``bad-cost`` reject, named.

Counting a sample's own tokens exactly is what ``shardstream columns --fn`` (your tokenizer) is for.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping

from ..mediaprobe import member_seconds
from ..mediatypes import AUDIO_EXTENSIONS, IMAGE_EXTENSIONS, VIDEO_EXTENSIONS
from .costfield import MAX_COST, BadCost

ESTIMATE = "@estimate"
DEFAULTS: Mapping[str, float] = {
    "chars_per_token": 4.0,
    "image_tokens": 576.0,
    "video_tokens": 0.0,
    "audio_tokens": 0.0,
    "video_second_tokens": 0.0,
    "audio_second_tokens": 0.0,
}


def is_estimate(cost: str) -> bool:
    return cost == ESTIMATE or cost.startswith(ESTIMATE + ":")


def estimate_parameters(cost: str) -> dict[str, float]:
    """The parameters ``@estimate[:name=value,...]`` gives, over the defaults; ValueError naming a bad one."""
    params = dict(DEFAULTS)
    _, _, given = cost.partition(":")
    for item in filter(None, given.split(",")):
        name, eq, value = item.partition("=")
        if name.strip() not in DEFAULTS or not eq:
            raise ValueError(f"cost {cost!r}: {item!r} is not one of {', '.join(f'{k}=N' for k in DEFAULTS)}")
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"cost {cost!r}: {name.strip()} must be a number, not {value!r}") from None
        if not math.isfinite(number) or number < 0 or (name.strip() == "chars_per_token" and number == 0):
            raise ValueError(f"cost {cost!r}: {name.strip()} must be a positive number, not {value!r}")
        params[name.strip()] = number
    return params


def estimate_cost(members: Iterable[tuple[str, bytes]], params: Mapping[str, float]) -> int:
    """The estimate for a sample's ``members`` ((extension, bytes) pairs, ``0.jpg`` or ``jpg``); BadCost
    when a per-second count meets a member without a duration, or the estimate passes ``MAX_COST``."""
    chars, timed, counts = 0, 0.0, {"image": 0, "video": 0, "audio": 0}  # timed: tokens by the second
    for ext, data in members:
        last = ext.rsplit(".", 1)[-1].lower()
        if last == "json":
            try:
                chars += _text_length(json.loads(data))
            except (ValueError, RecursionError):
                chars += len(data)  # not JSON after all: its characters, as text
        elif last == "txt":
            chars += len(data.decode("utf-8", "replace"))
        elif last in IMAGE_EXTENSIONS:
            counts["image"] += 1
        elif last in VIDEO_EXTENSIONS or last in AUDIO_EXTENSIONS:
            kind = "video" if last in VIDEO_EXTENSIONS else "audio"
            counts[kind] += 1
            if params[f"{kind}_second_tokens"]:
                timed += _seconds(ext, data) * params[f"{kind}_second_tokens"]
    tokens = math.ceil(chars / params["chars_per_token"])
    media = sum(n * params[f"{kind}_tokens"] for kind, n in counts.items()) + timed
    cost = tokens + math.ceil(media)
    if cost > MAX_COST:  # the .cols column is a u8: past it the writer would fail the whole pack
        raise BadCost(f"@estimate: {cost:.3g} tokens, past 2**64-1, what a cost column holds")
    return cost


def _seconds(ext: str, data: bytes) -> float:
    """A media member's duration from its header (torchcodec imported at the first); BadCost when it
    gives none."""
    found = member_seconds(ext, data)
    if found is None:
        raise BadCost(f"@estimate: member {ext!r} gives no duration in its header (not readable media?)")
    return found


def _text_length(value: object) -> int:
    """Characters in every string of a JSON value, keys aside."""
    stack, total = [value], 0
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return total
