"""The where-language on numpy columns: what it computes (chains, in, arithmetic, unsigned columns that do not
wrap), what it refuses (calls, attributes, lambdas, strings, ** ...) by name, and function predicates held to
one bool a sample."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from shardstream.subset import compile_where, where_mask

COLUMNS = {
    "cost": np.array([0, 100, 4095, 4096, 9000, 3], dtype="<u8"),
    "score": np.array([0.1, 0.5, 0.9, 0.3, 0.2, 0.25], dtype="<f4"),
    "lang": np.array([3, 1, 3, 2, 3, 0], dtype="<i2"),
}


@pytest.mark.parametrize(
    "expression, kept",
    [
        ("cost < 4096", [0, 1, 2, 5]),
        ("cost < 4096 and not (score < 0.2)", [1, 2, 5]),
        ("lang == 3 or score > 0.45", [0, 1, 2, 4]),
        ("100 <= cost < 5000", [1, 2, 3]),
        ("lang in (0, 2)", [3, 5]),
        ("lang not in [3]", [1, 3, 5]),
        ("cost - 5000 < 0", [0, 1, 2, 3, 5]),  # u8 widened: no wrap-around to 2**64 - 4900
        ("-cost > -101", [0, 1, 5]),
        ("cost % 2 == 1 or cost // 1000 == 9", [2, 4, 5]),
        ("cost / 0 > 1", [1, 2, 3, 4, 5]),  # inf, with no warning; 0 / 0 is nan, not > 1
        ("cost * 2 + 1 == 201", [1]),
        ("1 < 2", [0, 1, 2, 3, 4, 5]),
    ],
)
def test_expressions_compute_over_whole_columns(expression, kept):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mask = where_mask(expression, COLUMNS)
    assert mask.dtype == bool and mask.shape == (6,)
    assert np.flatnonzero(mask).tolist() == kept


@pytest.mark.parametrize(
    "expression, construct",
    [
        ("__import__('os')", "a call"),
        ("cost.__class__", "an attribute"),
        ("(lambda: 1)()", "a call"),
        ("(lambda: 1)", "a lambda"),
        ("cost == 'en'", "a str constant"),
        ("cost[0] > 1", "a subscript"),
        ("cost ** 2 > 1", "the operator **"),
        ("cost if cost else cost", "an if-else"),
        ("[c for c in cost]", "a comprehension"),
        ("cost == True", "a bool constant"),
        ("cost is 3", "the comparison is"),
        ("~cost", "the operator ~"),
        ("cost in cost", "in with something other than a tuple or list"),
        ("cost and lang", "and over numbers"),
        ("(cost, lang)", "Tuple"),
    ],
)
def test_anything_else_is_refused_naming_the_construct_and_the_expression(expression, construct):
    with pytest.raises(ValueError) as caught:
        where_mask(expression, COLUMNS)
    assert construct in str(caught.value) and repr(expression) in str(caught.value)


def test_refused_before_any_column_is_needed():
    with pytest.raises(ValueError, match="a call"):
        compile_where("__import__('os').system('touch /tmp/owned') or cost > 0")


def test_an_unknown_name_lists_the_columns_there_are():
    with pytest.raises(ValueError, match=r"'quality' .* the columns are: cost, lang, score"):
        where_mask("quality >= 5", COLUMNS)
    assert compile_where("quality >= 5 and lang == 3").names == {"quality", "lang"}


def test_numbers_are_not_an_answer_and_bad_syntax_is_named():
    with pytest.raises(ValueError, match="gives numbers, not true or false"):
        where_mask("cost + 1", COLUMNS)
    with pytest.raises(ValueError, match=r"'cost <' is not an expression"):
        where_mask("cost <", COLUMNS)
    with pytest.raises(ValueError, match="too large"):
        where_mask("cost + 1" + "0" * 40 + " > 0", COLUMNS)


def test_a_function_gets_the_columns_and_must_return_one_bool_a_sample():
    def short(columns):
        return columns["cost"][:3] < 10

    def numbers(columns):
        return columns["cost"] + 1

    assert np.flatnonzero(where_mask(lambda c: c["score"] > 0.4, COLUMNS)).tolist() == [1, 2]
    with pytest.raises(ValueError, match=r"function short returned bool of shape \(3,\).*shard's 6 samples"):
        where_mask(short, COLUMNS)
    with pytest.raises(ValueError, match=r"function numbers returned uint64"):
        where_mask(numbers, COLUMNS)
