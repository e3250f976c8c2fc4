"""``curate train-classifier`` on local JSONL, then the model in a filter chain."""

import logging
import random
import re

import pytest

from curate.stages.errors import DataError, SettingsError
from tests.conftest import curate, curate_here, read_output, write_jsonl

GOOD = "river valley history research careful analysis results evidence method study report".split()
BAD = "click buy cheap free winner casino bonus offer now deal discount".split()


def docs(words, n, seed, prefix):
    rng = random.Random(seed)
    return [{"id": f"{prefix}{i}", "text": " ".join(rng.choice(words) for _ in range(30))} for i in range(n)]


def test_train_then_filter(tmp_path):
    write_jsonl(tmp_path / "pos.jsonl", docs(GOOD, 150, 1, "p"))
    write_jsonl(tmp_path / "neg" / "neg.jsonl", docs(BAD, 150, 2, "n"))
    model = tmp_path / "quality.bin"
    proc = curate("train-classifier", "--positive", tmp_path / "pos.jsonl", "--negative",
                  tmp_path / "neg" / "*.jsonl", "--output", model, "--dim", "8", "--bucket", "1000", "--epoch", "10")
    assert "150 positive, 150 negative documents; validation on 30 documents: precision@1 1.000" in proc.stdout
    assert model.stat().st_size > 0
    chain = tmp_path / "chain.yaml"
    chain.write_text(f"filters:\n  - {{filter: classifier, model: {model}, min: 0.5}}\n")
    write_jsonl(tmp_path / "mixed.jsonl", docs(GOOD, 5, 3, "g") + docs(BAD, 5, 4, "b"))
    curate("filter", "--config", chain, "--input", tmp_path / "mixed.jsonl", "--output", tmp_path / "out",
           "--keep-scores", "--workers", "1")
    out = read_output(tmp_path / "out")
    assert sorted(out["id"]) == [f"g{i}" for i in range(5)]
    assert (out["score_classifier"] > 0.5).all()


def test_usage_errors_exit_2(tmp_path):
    write_jsonl(tmp_path / "pos.jsonl", docs(GOOD, 3, 1, "p"))
    proc = curate("train-classifier", "--positive", tmp_path / "pos.jsonl", "--negative", tmp_path / "pos.jsonl",
                  "--output", tmp_path / "nope" / "m.bin", check=False)
    assert proc.returncode == 2 and "folder" in proc.stderr and proc.stderr.count("\n") == 1
    # the first case in a real process (its exit code), this one through cli.main here
    proc = curate_here("train-classifier", "--positive", tmp_path / "pos.jsonl", "--negative",
                       tmp_path / "pos.jsonl", "--output", tmp_path / "m.bin", "--valid-fraction", "1.5")
    assert proc.returncode == 2 and "--valid-fraction" in proc.stderr


def _args(tmp_path, *extra):
    import argparse

    from curate.app.commands import train_classifier

    p = argparse.ArgumentParser()
    train_classifier.add_arguments(p)
    return p.parse_args(["--positive", str(tmp_path / "pos.jsonl"), "--negative", str(tmp_path / "pos.jsonl"),
                         "--output", str(tmp_path / "m.bin"), *map(str, extra)])


@pytest.mark.parametrize("extra,message", [
    (("--lr", "0"), "--lr must be a positive number; got 0.0"),
    (("--lr", "-0.5"), "--lr must be a positive number"),
    (("--lr", "nan"), "--lr must be a positive number"),
    (("--lr", "inf"), "--lr must be a positive number"),
    (("--epoch", "0"), "--epoch must be positive"),
    (("--dim", "-1"), "--dim must be positive"),
    (("--valid-fraction", "nan"), "--valid-fraction"),
    (("--seed", "-1"), "--seed must be in"),
    (("--max-docs", "0"), "--max-docs must be positive"),
])
def test_numeric_options_are_checked_before_reading(tmp_path, monkeypatch, extra, message):
    from curate.app.commands import train_classifier

    monkeypatch.setattr(train_classifier, "read_texts", lambda *a: pytest.fail("read data before checking options"))
    with pytest.raises(SettingsError, match=re.escape(message)):
        train_classifier.main(_args(tmp_path, *extra))


def test_warns_that_without_max_docs_everything_is_read(tmp_path, monkeypatch, caplog):
    from curate.app.commands import train_classifier

    monkeypatch.setattr(train_classifier, "read_texts", lambda *a: (_ for _ in ()).throw(DataError("stop here")))
    with caplog.at_level(logging.WARNING), pytest.raises(DataError):
        train_classifier.main(_args(tmp_path))
    assert "no --max-docs: every document" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING), pytest.raises(DataError):
        train_classifier.main(_args(tmp_path, "--max-docs", "10"))
    assert "--max-docs" not in caplog.text
