"""The key rule at its edges: each refusal says which rule the key broke; names split after the last slash."""

from __future__ import annotations

import pytest

from shardstream.errors import KeyRuleError
from shardstream.format import check_key, split_member_name


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("", r"^empty key$"),
        ("a\x00b", r"^key 'a\\x00b' holds a NUL, newline, carriage return or backslash$"),
        ("a\rb", r"^key 'a\\rb' holds a NUL, newline, carriage return or backslash$"),
        ("/abs", r"^key '/abs' is an absolute path; tar member names must be relative$"),
        ("/", r"^key '/' is an absolute path; tar member names must be relative$"),
        ("a/../b", r"^key 'a/\.\./b' has an empty, '\.' or '\.\.' path component$"),
        ("a/", r"^key 'a/' has an empty, '\.' or '\.\.' path component$"),
        ("..", r"^key '\.\.' has an empty, '\.' or '\.\.' path component$"),
    ],
    ids=["empty", "nul", "cr", "absolute", "root", "dotdot", "trailing-slash", "only-dotdot"],
)
def test_each_refusal_names_the_key_and_the_rule(key, message):
    with pytest.raises(KeyRuleError, match=message):
        check_key(key)


@pytest.mark.parametrize("key", ["a", "0001", "a/b/0001", "x-y_z", "a.b/c"])
def test_keys_that_read_back_are_returned_as_they_are(key):
    assert check_key(key) == key
    assert split_member_name(f"{key}.jpg") == (key, "jpg")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # The key stops at the first dot after the LAST slash, whatever dots earlier directories hold.
        ("a/b.c/d.jpg", ("a/b.c/d", "jpg")),
        ("a.b/c.d/e", ("a.b/c.d/e", "")),
        ("a.b/c.d/e.f.g", ("a.b/c.d/e", "f.g")),
        # A name that starts with its dot has an empty key, as webdataset reads it.
        (".jpg", ("", "jpg")),
        (".0.jpg", ("", "0.jpg")),
        ("dir/.jpg", ("dir/", "jpg")),
    ],
)
def test_split_member_name_at_the_edges(name, expected):
    assert split_member_name(name) == expected
