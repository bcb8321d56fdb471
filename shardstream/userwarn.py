"""Warnings shown at the user's line: the first frame outside shardstream, streamer and packer.

A fixed ``stacklevel`` points into the library whenever the depth varies, and a chain of generators (the
reader, the buffer, the decoder) varies it with every node; Python 3.12's ``skip_file_prefixes`` does this,
but 3.10 and 3.11 lack it. Costs one walk up the stack per warning, which is off every hot path.
"""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["warn_user"]

_HERE = os.path.dirname(os.path.abspath(__file__))
_OURS = tuple(
    os.path.join(os.path.dirname(_HERE), name) + os.sep for name in ("shardstream", "streamer", "packer")
)


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` pointing at the first caller outside the three packages (a DataLoader worker's own
    loop, when the library runs there)."""
    frame, level = sys._getframe(1), 2  # stacklevel 2 is the caller of warn_user
    while frame is not None and frame.f_code.co_filename.startswith(_OURS):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
