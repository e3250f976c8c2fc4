"""rows_sharing against brute force: every entry equal to another, ascending."""

import numpy as np
import pytest

from curate.stages.dedup.shared import rows_sharing


@pytest.mark.parametrize("seed", range(5))
def test_the_rows_sharing_a_key_are_those_a_count_of_every_key_finds(seed):
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 2**64 - 1, 500, dtype=np.uint64, endpoint=True)
    keys[rng.integers(0, 500, 60)] = keys[rng.integers(0, 500, 60)]  # some repeated, some three times
    keys[:2] = np.uint64(2**64 - 1)  # the largest key twice
    counts = {k: int((keys == k).sum()) for k in keys.tolist()}
    expect = [i for i, k in enumerate(keys.tolist()) if counts[k] > 1]
    assert rows_sharing(keys).tolist() == expect


def test_no_key_shared_and_none_at_all():
    assert rows_sharing(np.array([3, 1, 2], dtype=np.uint64)).tolist() == []
    assert rows_sharing(np.array([], dtype=np.uint64)).tolist() == []
    assert rows_sharing(np.array([4, 4], dtype=np.int64)).tolist() == [0, 1]
