"""The keyed permutation: its domain bounds, the errors that name them, and agreement of both forms."""

from __future__ import annotations

import numpy as np
import pytest

from streamer.permute import Permutation


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
