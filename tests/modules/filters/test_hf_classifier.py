"""``hf_classifier``: a tiny randomly initialised Hugging Face model, built in the test, scores documents.

The oracle is transformers itself on the same model (tokenize, forward, softmax) outside curate.
Edge cases: a regression head (one output) and a two-label head, a text longer than max_length
(truncated), an empty text, batches smaller than the documents, two classifiers in one chain through
``tag`` (an ensemble: two score columns), and the refusals (no directory, no config.json, a label the
model lacks, a label for a regression head).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from curate.stages.errors import SettingsError
from curate.stages.filters.base import Texts
from tests.conftest import read_output, run_stage, write_jsonl
from tests.modules.tokenize.helpers import make_bpe_dir

torch = pytest.importorskip("torch")
TEXTS = ["A clear explanation of photosynthesis for students.", "buy now cheap " * 200, "",
         "The quick brown fox jumps over the lazy dog.", "Lorem ipsum dolor sit amet."]


def tiny_model(path, num_labels: int):
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    make_bpe_dir(path)
    tok = PreTrainedTokenizerFast.from_pretrained(str(path))
    tok.pad_token = tok.eos_token
    tok.save_pretrained(str(path))
    labels = {0: "low", 1: "high"} if num_labels == 2 else {0: "score"}
    config = BertConfig(vocab_size=len(tok), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64, num_labels=num_labels,
                        id2label=labels, label2id={v: k for k, v in labels.items()},
                        pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(str(path))
    return str(path)


def oracle(directory, texts, label_index):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(directory)
    model = AutoModelForSequenceClassification.from_pretrained(directory).eval()
    out = []
    with torch.inference_mode():
        for text in texts:  # one at a time: no padding at all
            if not text.strip():
                out.append(np.nan)
                continue
            logits = model(**tok([text], truncation=True, max_length=64, return_tensors="pt")).logits[0]
            out.append(float(logits[0] if label_index is None else torch.softmax(logits, -1)[label_index]))
    return np.array(out)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    base = tmp_path_factory.mktemp("hf")
    return {"two": tiny_model(base / "two", 2), "one": tiny_model(base / "one", 1)}


@pytest.mark.parametrize("which, label, index", [("two", "high", 1), ("one", None, None)])
def test_scores_equal_transformers_on_the_same_model(models, which, label, index):
    from curate.stages.filters.hf_classifier import HFClassifier

    flt = HFClassifier(model=models[which], label=label, max_length=64, batch_size=2, min=None, max=1e9)
    got = flt.score_texts(Texts(pd.Series(TEXTS, dtype="string")))
    np.testing.assert_allclose(got, oracle(models[which], TEXTS, index), rtol=1e-4, atol=1e-5)


def test_an_ensemble_of_two_classifiers_through_tag(models, tmp_path):
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"id": f"a{i}", "text": t} for i, t in enumerate(TEXTS[:3])])
    write_jsonl(tmp_path / "in" / "b.jsonl", [{"id": f"b{i}", "text": t} for i, t in enumerate(TEXTS[3:])])
    chain = tmp_path / "chain.yaml"
    chain.write_text(f"filters:\n  - {{filter: hf_classifier, name: quality, model: {models['two']}, label: high, "
                     f"max_length: 64, min: 0.5}}\n  - {{filter: hf_classifier, name: edu, model: {models['one']}, "
                     f"max_length: 64, min: -100}}\n")
    run_stage("tag", {"config": str(chain)}, str(tmp_path / "in" / "*.jsonl"), tmp_path / "tagged")
    out = read_output(tmp_path / "tagged")
    assert len(out) == 5 and {"score_quality", "score_edu"} <= set(out.columns)
    np.testing.assert_allclose(out["score_quality"].to_numpy(), oracle(models["two"], TEXTS, 1), rtol=1e-4, atol=1e-5)


def test_refusals(models, tmp_path):
    from curate.stages.filters.hf_classifier import HFClassifier

    with pytest.raises(SettingsError, match="no such directory"):
        HFClassifier(model=str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(SettingsError, match="no config.json"):
        HFClassifier(model=str(tmp_path / "empty"))
    with pytest.raises(SettingsError, match=r"no label 'medium' \(labels: low, high\)"):
        HFClassifier(model=models["two"], label="medium")
    with pytest.raises(SettingsError, match="name the label to score"):
        HFClassifier(model=models["two"])
    with pytest.raises(SettingsError, match="a regression head"):
        HFClassifier(model=models["one"], label="score")
