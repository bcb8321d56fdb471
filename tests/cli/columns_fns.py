"""Functions ``shardstream columns --fn`` imports in the tests (``tests.cli.columns_fns:NAME``): each of a
sample's raw members, the way a user's tokenizer count would be written."""

from __future__ import annotations

import json
import os
import time


def text_length(sample):
    """The cost: bytes of the text member."""
    return len(sample["txt"])


def two_columns(sample):
    """Several columns at once: a length and a number from the record."""
    return {"length": len(sample["txt"]), "score": json.loads(sample["json"])["n"] - 5}


def slow_length(sample):
    """text_length, slowly once $COLUMNS_TEST_SLOW names a file that exists (for a kill mid-run)."""
    if os.path.exists(os.environ.get("COLUMNS_TEST_SLOW", "/nonexistent")):
        time.sleep(0.002)
    return len(sample["txt"])


def not_an_int(sample):
    return "many"


NOT_A_FUNCTION = 3
