"""Brace patterns and shard names at their edges: the largest number a width holds, count 0, bare text."""

from __future__ import annotations

import pytest

from shardstream.errors import FormatError
from shardstream.format import BracePattern, shard_pattern
from shardstream.format.patterns import shard_name


@pytest.mark.parametrize("digits", [1, 2, 6])
def test_shard_name_fills_its_width_and_refuses_one_more(digits):
    largest = 10**digits - 1
    assert shard_name("train", largest, digits) == f"train-{'9' * digits}.tar"
    assert shard_name("train", 0, digits) == f"train-{'0' * digits}.tar"
    with pytest.raises(FormatError, match=rf"^shard number {largest + 1} needs more than {digits} digits$"):
        shard_name("train", largest + 1, digits)


def test_shard_name_default_width_is_six_digits():
    assert shard_name("val", 999_999) == "val-999999.tar"
    with pytest.raises(FormatError, match=r"^shard number 1000000 needs more than 6 digits$"):
        shard_name("val", 1_000_000)


@pytest.mark.parametrize("count", [0, -1])
def test_shard_pattern_refuses_no_shards_naming_count(count):
    with pytest.raises(ValueError, match=r"^count must be positive$"):
        shard_pattern("train", count)


def test_shard_pattern_of_one_shard_is_its_name():
    assert shard_pattern("train", 1) == "train-000000.tar"
    assert shard_pattern("train", 2, 3) == "train-{000..001}.tar"


@pytest.mark.parametrize("text", ["plain.tar", "ab", "x", "a}b"])
def test_text_without_braces_is_a_one_item_pattern(text):
    pattern = BracePattern(text)
    assert len(pattern) == 1
    assert pattern[0] == text
    assert list(pattern) == [text]


def test_second_group_is_closed_by_its_own_brace():
    assert list(BracePattern("{a,b}-{1..2}.tar")) == ["a-1.tar", "a-2.tar", "b-1.tar", "b-2.tar"]
    assert list(BracePattern("x}{1..2}")) == ["x}1", "x}2"]
