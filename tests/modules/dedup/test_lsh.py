"""LSH parameters (datasketch's rule) and bucket keys."""

import numpy as np
import pytest
from datasketch.lsh import _optimal_param

from curate.stages.dedup import lsh


@pytest.mark.parametrize("threshold,num_perm", [(0.8, 128), (0.5, 128), (0.9, 64), (0.7, 256), (0.95, 128),
                                                 (0.3, 32)])
def test_optimal_params_are_datasketchs(threshold, num_perm):
    # numpy's Simpson rule instead of scipy's quad: the same choice as datasketch's own search
    assert lsh.optimal_params(threshold, num_perm) == _optimal_param(threshold, num_perm, 0.5, 0.5)


def test_optimal_params_weights_are_datasketchs():
    assert lsh.optimal_params(0.8, 128, 0.1, 0.9) == _optimal_param(0.8, 128, 0.1, 0.9)


@pytest.mark.parametrize("threshold,expected", [(0.8, (21, 6)), (0.7, (32, 4)), (0.9, (12, 10))])
def test_recall_params(threshold, expected):
    # the most rows per band with P(candidate | J = threshold) >= 0.99 (by hand from 1 - (1 - s^r)^b)
    bands, rows = lsh.recall_params(threshold, 128)
    assert (bands, rows) == expected
    assert lsh.candidate_probability(threshold, bands, rows) >= 0.99
    assert lsh.candidate_probability(threshold, 128 // (rows + 1), rows + 1) < 0.99
    assert lsh.recall_params(0.999, 1) == (1, 1)  # tiny signatures: one band of one row


def test_candidate_probability():
    assert lsh.candidate_probability(1.0, 9, 13) == 1.0
    assert lsh.candidate_probability(0.0, 9, 13) == 0.0
    assert lsh.candidate_probability(0.9, 9, 13) == pytest.approx(1 - (1 - 0.9**13) ** 9)


def test_band_keys():
    rng = np.random.default_rng(0)
    sig = rng.integers(0, 2**32, (5, 12), dtype=np.uint32)
    sig[1] = sig[0]                      # same signature: same key in every band
    sig[2, :4] = sig[0, :4]              # same first band only
    sig[3, 4:8] = sig[0, :4]             # band 1 equals band 0 of doc 0: different bands never share a key
    keys = lsh.band_keys(sig, bands=3, rows=4)
    assert keys.shape == (5, 3) and keys.dtype == np.uint64
    assert (keys[1] == keys[0]).all()
    assert keys[2, 0] == keys[0, 0] and (keys[2, 1:] != keys[0, 1:]).all()
    assert keys[3, 1] != keys[0, 0]
    assert (lsh.band_keys(sig, 3, 4) == keys).all()  # deterministic
    swapped = sig.copy()
    swapped[:, [0, 1]] = swapped[:, [1, 0]]
    assert (lsh.band_keys(swapped, 3, 4)[:, 0] != keys[:, 0]).all()  # order of values matters
    with pytest.raises(ValueError, match="cannot hold"):
        lsh.band_keys(sig, 4, 4)
