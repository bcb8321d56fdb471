"""A mixture's YAML file: ``sources`` (each a path with a weight, repeat or samples) and shared options.

Every key is checked when the file is read, so a typo fails at once with the file, the source and the key
named, not later in a worker. Relative source paths are taken from the file's folder, so a config can sit
beside its datasets.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from shardstream.io.urls import scheme_of

OPTIONS = (
    "epoch_size",
    "shuffle",
    "seed",
    "buffer_size",
    "remainder",
    "on_error",
    "keep_length",
    "cache_dir",
    "cache_size",
    "prefetch",
    "prefetch_bytes",
    "max_open",
    "stratify",
    "defer_reads",
    "batch_tokens",
    "batching",
    "batch_window",
    "overlong",
    "weight_by",
    "batch_size",
)


def load_mixture(path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(sources, options) from a mixture YAML file; ValueError naming the file and the key on bad input."""
    file = Path(path)
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{file}: cannot read the mixture file ({exc.strerror or exc})") from exc
    except yaml.YAMLError as exc:
        raise ValueError(f"{file}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict) or "sources" not in data:
        raise ValueError(
            f"{file}: a mixture file is a mapping with a 'sources' list (see configs/mixture-example.yaml)"
        )
    for key in data:
        if key != "sources" and key not in OPTIONS:
            raise ValueError(
                f"{file}: unknown key {key!r}; a mixture file takes sources, {', '.join(OPTIONS)}"
            )
    sources = data["sources"]
    if not isinstance(sources, list) or not sources:
        raise ValueError(f"{file}: 'sources' must be a non-empty list")
    out = []
    for position, entry in enumerate(sources):
        if not isinstance(entry, dict):
            raise ValueError(f"{file}: source {position} must be a mapping with a path, not {entry!r}")
        entry = dict(entry)
        if isinstance(entry.get("path"), str):
            entry["path"] = _resolve(entry["path"], file.parent)
        if isinstance(entry.get("image_size"), list):
            entry["image_size"] = tuple(entry["image_size"])
        out.append(entry)
    options = {key: value for key, value in data.items() if key != "sources"}
    return out, options


def _resolve(text: str, folder: Path) -> str:
    if scheme_of(text) != "file" or os.path.isabs(text) or text.startswith("file:"):
        return text
    return str(folder / text)
