"""The keyed permutation: its domain bounds, the errors that name them, and agreement of both forms."""

from __future__ import annotations

import hashlib
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.placement import permute
from streamer.placement import segments as placement
from streamer.placement.permute import Permutation, _native_permute


def _domain(n: int) -> int:
    """What the Feistel network permutes for [0, n): the smallest power of 4 that holds it, at least 4."""
    return 1 << (2 * max(1, ((n - 1).bit_length() + 1) // 2))


def _numpy_form(n: int, seed: int, epoch: int, salt: str = "shards") -> Permutation:
    """The numpy loop, once one encryption is seen to permute its domain on a sample. Cycle walking ends only
    because each encryption is a bijection of [0, domain); an arithmetic slip that breaks that fails here,
    fast, where array() would walk forever."""
    perm = Permutation(n, seed, epoch, salt, native=False)
    domain = _domain(n)
    size = min(domain, 1 << 16)
    step = domain // size  # past 2^16, inputs spread over the whole domain, each with all its low bits set
    spread = np.arange(size, dtype=np.uint64) * np.uint64(step) + np.uint64(step - 1)
    inputs = np.unique(np.concatenate([np.arange(size, dtype=np.uint64), spread]))
    with np.errstate(over="ignore"):
        out = perm._encrypt(inputs)
    assert int(out.max()) < domain, f"an encryption left [0, {domain})"
    assert len(np.unique(out)) == len(inputs), "two inputs of one encryption gave the same output"
    return perm


@pytest.mark.parametrize("n", [1, 2, 3, 5, 63, 65, 300])
def test_call_accepts_exactly_zero_to_n_minus_one(n):
    perm = Permutation(n, seed=0, epoch=2)
    assert [perm(i) for i in range(n)] == perm.array().tolist()
    for outside in (-1, n, n + 1):
        with pytest.raises(IndexError, match=rf"^{outside} outside \[0, {n}\)$"):
            perm(outside)


def test_array_of_chosen_indices_matches_the_whole_array():
    perm = Permutation(1000, seed=3, epoch=0)
    whole = perm.array()
    picked = np.array([999, 0, 500, 1])
    np.testing.assert_array_equal(perm.array(picked), whole[picked])
    assert perm.array(picked).dtype == np.int64


@pytest.mark.parametrize("n", [0, -1])
def test_empty_domain_is_refused_naming_n(n):
    with pytest.raises(ValueError, match=rf"^n must be >= 1, not {n}$"):
        Permutation(n, seed=0, epoch=0)


def test_seed_epoch_and_salt_each_change_the_order():
    base = Permutation(500, seed=1, epoch=0).array().tolist()
    assert Permutation(500, seed=1, epoch=0).array().tolist() == base
    assert Permutation(500, seed=2, epoch=0).array().tolist() != base
    assert Permutation(500, seed=1, epoch=1).array().tolist() != base
    assert Permutation(500, seed=1, epoch=0, salt="samples").array().tolist() != base


# Orders that resumed runs depend on: any change to the arithmetic (either loop) breaks old checkpoints.
# The small ones pin the domain's size where it is smallest (4, for n <= 4) and at a power of 4 (16).
GOLDEN = {
    (10, 0, 0, "shards"): "d14a34efe6b30c94",
    (97, 7, 3, "shards"): "3db7668014ed6e8c",
    (1000, 1, 2, "samples"): "ea56b849287dc3ee",
    (3, 0, 0, "shards"): "53afea624a503a0b",
    (4, 2, 1, "shards"): "dec4a4e67a8fe70f",
    (16, 5, 0, "samples"): "ea2a3cf4ab978e62",
}


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_orders_are_the_ones_earlier_releases_wrote(case, native):
    n, seed, epoch, salt = case
    if native and _native_permute is None:
        pytest.skip("streamer/placement/_order.c is not built here")
    perm = Permutation(n, seed, epoch, salt) if native else _numpy_form(n, seed, epoch, salt)
    order = perm.array()
    assert hashlib.sha256(order.astype("<i8").tobytes()).hexdigest()[:16] == GOLDEN[case]
    if salt == "shards":  # the default salt: shard orders are made without one
        assert Permutation(n, seed, epoch, native=native).array().tolist() == order.tolist()


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 16, 17, 100, 1000, 5000, 2**16])
def test_one_encryption_permutes_the_whole_domain_so_cycle_walking_ends(n):
    _numpy_form(n, seed=9, epoch=4)  # asserts it


@pytest.mark.skipif(_native_permute is None, reason="streamer/placement/_order.c is not built here")
@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 5000),
    seed=st.integers(0, 2**63 - 1),
    epoch=st.integers(0, 1000),
    salt=st.sampled_from(["shards", "samples", "x"]),
)
def test_the_c_loop_and_numpy_give_the_same_bijection(n, seed, epoch, salt):
    native = Permutation(n, seed, epoch, salt).array()
    python = _numpy_form(n, seed, epoch, salt).array()
    np.testing.assert_array_equal(native, python)
    assert native.dtype == python.dtype == np.int64
    assert sorted(native.tolist()) == list(range(n))


@pytest.mark.skipif(_native_permute is None, reason="streamer/placement/_order.c is not built here")
@pytest.mark.parametrize("n", [2**20 + 1, 3 * 10**9, 2**40 - 1, 2**62 + 3])
def test_both_loops_agree_on_chosen_indices_of_huge_domains(n):
    picked = np.array([0, 1, n // 3, n // 2, n - 2, n - 1], dtype=np.int64)
    native = Permutation(n, seed=5, epoch=1).array(picked)
    python = _numpy_form(n, seed=5, epoch=1).array(picked)
    np.testing.assert_array_equal(native, python)
    assert ((native >= 0) & (native < n)).all() and len(set(native.tolist())) == len(picked)
    assert native.tolist() == [Permutation(n, seed=5, epoch=1)(int(i)) for i in picked]


@pytest.mark.parametrize("bad", [[-1], [0, 10], [3, 2**40]])
def test_chosen_indices_outside_the_domain_are_refused_before_any_walk(bad):
    # The C loop first where it is built: it would refuse these itself, with its own message, while numpy's
    # walk from outside the domain need not end; so a check that let one through fails here, not hangs.
    for native in (True, False) if _native_permute is not None else (False,):
        with pytest.raises(IndexError, match=r"^indices outside \[0, 10\)$"):
            Permutation(10, seed=0, epoch=0, native=native).array(np.array(bad))


@pytest.mark.parametrize("native", [True, False])
def test_indices_outside_are_refused_even_where_the_walk_would_end(native):
    n = 2**62 + 3  # a domain of 2^64: -1 (read as uint64) and n are in it, and the walk from them ends
    for bad in ([-1], [0, n], [n - 1, 2**63 - 1]):
        with pytest.raises(IndexError, match=rf"^indices outside \[0, {n}\)$"):
            Permutation(n, seed=0, epoch=0, native=native).array(np.array(bad, dtype=np.int64))


@pytest.mark.skipif(_native_permute is None, reason="streamer/placement/_order.c is not built here")
def test_the_c_loop_is_the_default_and_native_false_is_numpys(monkeypatch):
    calls = []

    def counted(*args):
        calls.append(args[0])
        return _native_permute(*args)

    monkeypatch.setattr(permute, "_native_permute", counted)
    default = Permutation(12, seed=1, epoch=0)
    assert default(5) == default.array()[5]
    assert calls == [12, 12]
    numpy = _numpy_form(12, seed=1, epoch=0)
    assert numpy(5) == numpy.array()[5] == default(5)
    assert calls == [12, 12, 12]


def test_the_numpy_loop_wraps_modulo_2_to_the_64_without_overflow_warnings():
    # A single index (a 0-d array) makes numpy's arithmetic scalar, where overflow would warn by default.
    # 123 lands in range at once: the numpy loop cannot walk a 0-d input yet (y[out_of_range] = ... on a
    # numpy scalar raises TypeError), which the C loop can.
    perm = _numpy_form(1000, seed=2, epoch=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert int(perm.array(np.array(123))) == perm(123) == Permutation(1000, seed=2, epoch=0)(123)
        assert perm.array(np.array([123, 7])).tolist() == [perm(123), perm(7)]


@pytest.mark.parametrize("native", [True, False])
def test_an_empty_choice_gives_an_empty_int64_array(native):
    out = Permutation(10, seed=0, epoch=0, native=native).array(np.array([], dtype=np.int64))
    assert out.dtype == np.int64 and out.shape == (0,)


@pytest.mark.skipif(_native_permute is None, reason="streamer/placement/_order.c is not built here")
def test_the_c_loop_refuses_buffers_that_do_not_fit():
    keys = Permutation(10, seed=0, epoch=0)._keys.astype("<u8").tobytes()
    out = np.empty(4, dtype=np.int64)
    with pytest.raises(ValueError, match="do not fit"):
        _native_permute(10, 2, keys[:-1], None, out)  # keys not whole uint64s
    with pytest.raises(ValueError, match="do not fit"):
        _native_permute(10, 2, keys, np.zeros(3, dtype=np.uint64), out)  # indices shorter than out
    with pytest.raises(ValueError, match="do not fit"):
        _native_permute(10, 0, keys, None, out)
    with pytest.raises(ValueError, match="do not fit"):
        _native_permute(0, 2, keys, None, out)
    with pytest.raises(ValueError, match="do not fit"):
        _native_permute(17, 2, keys, None, out)  # a domain of 2^4 cannot hold 17
    with pytest.raises(IndexError, match=r"^permute: indices\[1\] is outside \[0, 10\)$"):
        _native_permute(10, 2, keys, np.array([3, 10, 0, 0], dtype=np.uint64), out)
    _native_permute(16, 2, keys, None, out)  # the largest n a domain of 2^4 holds
    assert sorted(Permutation(16, 0, 0).array().tolist()) == list(range(16))


@settings(max_examples=100, deadline=None)
@given(counts=st.lists(st.integers(0, 2**40), min_size=1, max_size=300), seed=st.integers(0, 2**32))
def test_stream_ends_are_the_prefix_sums_of_the_ordered_counts(counts, seed):
    order = Permutation(len(counts), seed, 0).array()
    expected = np.cumsum(np.array(counts, dtype=np.int64)[order])
    ends = placement.stream_ends(np.array(counts), order)
    np.testing.assert_array_equal(ends, expected)
    assert ends.dtype == np.int64


def test_stream_ends_without_the_c_loop_are_numpys(monkeypatch):
    monkeypatch.setattr(placement, "_native_ends", None)
    order = np.array([2, 0, 1])
    assert placement.stream_ends(np.array([5, 0, 7]), order).tolist() == [7, 12, 12]
    assert placement.stream_ends(np.array([], dtype=np.int64), order[:0]).tolist() == []


@pytest.mark.skipif(placement._native_ends is None, reason="streamer/placement/_order.c is not built here")
def test_the_c_prefix_sums_refuse_an_order_outside_the_shards():
    counts, out = np.array([1, 2, 3], dtype=np.int64), np.empty(2, dtype=np.int64)
    with pytest.raises(IndexError, match=r"^ends: order\[1\] = 3 is not a shard of 3$"):
        placement._native_ends(counts, np.array([0, 3], dtype=np.int64), out)
    with pytest.raises(IndexError, match=r"^ends: order\[0\] = -1 is not a shard of 3$"):
        placement._native_ends(counts, np.array([-1, 0], dtype=np.int64), out)
    with pytest.raises(ValueError, match="out as long as order"):
        placement._native_ends(counts, np.array([0], dtype=np.int64), out)
    assert placement._native_ends(counts, np.array([2, 2], dtype=np.int64), out) == 6
    assert out.tolist() == [3, 6]


@pytest.mark.parametrize("native", [True, False])
def test_chosen_indices_of_any_shape_keep_it_on_both_loops(native):
    if native and _native_permute is None:
        pytest.skip("streamer/placement/_order.c is not built here")
    perm = Permutation(37, seed=4, epoch=0, native=native)  # a domain of 64: most inputs walk
    whole = perm.array()
    assert [int(perm.array(np.array(k))) for k in range(37)] == whole.tolist()  # 0-d, walking or not
    assert perm.array(np.array(5)).shape == ()
    grid = np.arange(36).reshape(6, 6)
    np.testing.assert_array_equal(perm.array(grid), whole[:36].reshape(6, 6))
