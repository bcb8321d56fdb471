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


def test_a_range_step_must_be_positive_naming_the_pattern():
    with pytest.raises(FormatError, match=r"^pattern 'a\{0\.\.4\.\.0\}': range step must be positive$"):
        BracePattern("a{0..4..0}")
    assert list(BracePattern("a{4..0..2}")) == ["a4", "a2", "a0"]  # a step counts down too
    assert list(BracePattern("a{5..5}")) == ["a5"]


def test_zero_padding_comes_from_either_end_and_only_from_a_leading_zero():
    assert list(BracePattern("s{8..010}")) == ["s008", "s009", "s010"]  # the upper end alone pads
    assert list(BracePattern("s{08..10}")) == ["s08", "s09", "s10"]
    assert list(BracePattern("s{9..11}")) == ["s9", "s10", "s11"]  # two digits, no leading zero: none
    assert list(BracePattern("s{0..2}")) == ["s0", "s1", "s2"]  # a lone 0 is not padding
    assert BracePattern("s{0..10}")[0] == "s0" and BracePattern("s{0..10}")[10] == "s10"
    assert list(BracePattern("s{1..05}")) == ["s01", "s02", "s03", "s04", "s05"]  # a two-digit upper end
    assert BracePattern("s{10..0}")[1] == "s9"  # counting down to a lone 0: no padding either


def test_a_brace_without_a_range_or_list_stays_literal_as_in_bash():
    assert list(BracePattern("a{b}c")) == ["a{b}c"]
    assert list(BracePattern("{}.tar")) == ["{}.tar"]


def test_bad_patterns_and_indices_are_named():
    with pytest.raises(FormatError, match=r"^pattern 'ab\{0\.\.2': '\{' at 2 is never closed$"):
        BracePattern("ab{0..2")
    with pytest.raises(FormatError, match=r"^pattern 'a\{b\{c\}\}': nested braces are not supported$"):
        BracePattern("a{b{c}}")
    pattern = BracePattern("p{0..1}")
    assert pattern.pattern == "p{0..1}" and repr(pattern) == "BracePattern('p{0..1}')"
    with pytest.raises(TypeError, match=r"^BracePattern indices must be integers$"):
        pattern["0"]  # type: ignore[index]
    with pytest.raises(IndexError, match=r"^index 2 out of range for 2 items of 'p\{0\.\.1\}'$"):
        pattern[2]
    assert pattern[-2] == "p0"


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["a-08.tar", "a-09.tar", "a-10.tar"], "a-{08..10}.tar"),
        (["x7.tar"], "x7.tar"),  # one name is its own pattern
        (["b1", "b2", "b3"], "b{1..3}"),
        (["b1", "b3"], None),  # not consecutive
        (["b2", "b1"], None),  # not increasing
        (["b01", "b2"], None),  # not one width
        (["a.tar", "b.tar"], None),  # no number
        (["{1}", "{2}"], None),  # a literal brace would read back as a pattern
        (["c1", "c2", "{3}"], None),
    ],
)
def test_infer_pattern_gives_exactly_the_names_or_none(names, expected):
    from shardstream.format.patterns import infer_pattern

    assert infer_pattern(names) == expected
    if expected is not None:
        assert list(BracePattern(expected)) == names
