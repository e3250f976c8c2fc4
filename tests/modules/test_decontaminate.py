"""decontaminate: task n-grams cut out of documents, checked on hand-made examples.

The example texts have one space between words and no punctuation before a match, where NeMo
Curator's TaskDecontamination and this stage must cut the same fragments (checked side by side with
NeMo 0.9 while writing these tests; see the README's parity table)."""

import json

import pytest

from curate.stages.decontaminate import (
    DecontaminateSettings,
    Index,
    count_matches,
    cut,
    decontaminate_text,
    task_ngrams,
    words,
)
from curate.stages.errors import SettingsError
from tests.conftest import read_output, run_stage, write_jsonl

# a 13-word test question
QUESTION = "what is the name of the river that flows through the old town"
FILLER = "the weather was mild and people walked along the streets talking about nothing much"


def settings(tmp_path, **kw):
    path = tmp_path / "task.jsonl"
    if not path.exists():
        write_jsonl(path, [{"question": QUESTION, "answers": ["the blue river of kings and queens of old"]}])
    return DecontaminateSettings(tasks=(f"quiz={path}",), task_fields=("question", "answers"), **kw)


def test_words_are_lower_case_without_punctuation_with_original_offsets():
    w, s, e = words("Hello, World!  it's -- fine")
    assert w == ["hello", "world", "its", "fine"]
    assert (s, e) == ([0, 7, 15, 23], [5, 12, 19, 27])  # spans without the punctuation at the edges


def test_task_ngrams_13_words_or_the_whole_short_text():
    grams = task_ngrams([QUESTION + " kings", "short text of only nine words in it here", "too short"], 13, 8)
    assert tuple(QUESTION.split()) in grams and tuple((QUESTION + " kings").split()[1:]) in grams
    assert tuple("short text of only nine words in it here".split()) in grams
    assert len(grams) == 3


def test_cut_follows_sentence_ends():
    text = "A first sentence. Another one here. MATCH words. Tail sentence one. Tail two."
    start = text.index("MATCH")
    end = start + len("MATCH words")
    # 5 characters each side, then to the nearest . ! ? outwards
    first, second = cut(text, start, end, _S(remove_char_each_side=5))
    assert first == "A first sentence."  # start - 5 falls inside "here": back to the '.' before it
    assert second == " Tail two."  # after the first '.' at or after end + 5


class _S:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def test_document_cut_in_two(tmp_path):
    s = settings(tmp_path, min_document_length=20, remove_char_each_side=10)
    index = Index.build([task_ngrams([QUESTION], 13, 8)])
    doc = f"{FILLER}. Intro sentence here. {QUESTION} twelve. More text. {FILLER} end."
    frags, tasks = decontaminate_text(doc, index, s)
    assert tasks == {0}
    # hand-checked: 10 characters before the match is inside "sentence", so the first part ends at
    # the '.' before "Intro"; 10 characters past the match is inside "More", so the second part
    # starts after "text."
    assert frags == [f"{FILLER}.", f" {FILLER} end."]


def test_count_is_non_overlapping_leftmost():
    index = Index.build([task_ngrams([QUESTION], 13, 8)])
    doc = " ".join([QUESTION] * 3)
    assert count_matches([doc, "nothing here", QUESTION.upper() + "!"], index) == {tuple(QUESTION.split()): 4}


def test_stage_end_to_end(tmp_path):
    s = dict(tasks=[f"quiz={tmp_path / 'task.jsonl'}"], task_fields=["question", "answers"],
             min_document_length=20, remove_char_each_side=10, max_matches=10, max_splits=2)
    settings(tmp_path)
    docs = [
        {"id": "clean", "text": f"{FILLER}."},                                                    # untouched
        {"id": "cut", "text": f"{FILLER}. Intro sentence here. {QUESTION} twelve. More text. {FILLER} end."},
        {"id": "short", "text": f"{QUESTION} x."},                                                # nothing left
        # two matches, three fragments (FILLER each time) > max_splits
        {"id": "many", "text": f"{FILLER}. Pad one here. {QUESTION} a. Pad two here. {FILLER}. Pad three. "
                               f"{QUESTION} b. Pad four here. {FILLER}."},
    ]
    write_jsonl(tmp_path / "in" / "a.jsonl", docs[:2])
    write_jsonl(tmp_path / "in" / "b.jsonl", docs[2:])
    m = run_stage("decontaminate", s, str(tmp_path / "in" / "*.jsonl"), tmp_path / "o")
    out = read_output(tmp_path / "o")
    assert out["id"].tolist() == ["clean", "cut#0", "cut#1"]
    assert out["text"].tolist() == [f"{FILLER}.", f"{FILLER}.", f" {FILLER} end."]
    assert m["counts"]["dropped"] == {"decontaminated_empty": 1, "decontaminated_too_many_splits": 1}
    assert m["decontaminate"]["tasks"]["quiz"] == {"ngrams": 2, "matched_ngrams": 1, "occurrences": 4,
                                                   "too_common": 0, "documents_cut": 3}
    assert m["decontaminate"]["documents_cut"] == 3 and m["decontaminate"]["fragments_written"] == 2
    assert m["decontaminate"]["documents_in"] == 4


def test_too_common_ngrams_stay(tmp_path):
    s = dict(tasks=[f"quiz={tmp_path / 'task.jsonl'}"], task_fields=["question"], min_document_length=5,
             remove_char_each_side=0, max_matches=1)
    settings(tmp_path)
    write_jsonl(tmp_path / "in.jsonl", [{"id": f"d{i}", "text": f"Start. {QUESTION}. End of it all."} for i in range(2)])
    m = run_stage("decontaminate", s, tmp_path / "in.jsonl", tmp_path / "o")
    assert read_output(tmp_path / "o")["id"].tolist() == ["d0", "d1"]  # seen twice > 1: left alone
    assert m["decontaminate"]["tasks"]["quiz"]["too_common"] == 1
    m = run_stage("decontaminate", {**s, "max_matches": 2}, tmp_path / "in.jsonl", tmp_path / "o2")
    assert read_output(tmp_path / "o2")["text"].tolist() == ["Start.", " End of it all."] * 2
    assert m["decontaminate"]["tasks"]["quiz"]["documents_cut"] == 2


def test_settings_errors(tmp_path):
    with pytest.raises(SettingsError, match="tasks"):
        DecontaminateSettings()
    with pytest.raises(SettingsError, match="no such file"):
        DecontaminateSettings(tasks=(str(tmp_path / "missing.jsonl"),))
    (tmp_path / "t.jsonl").write_text(json.dumps({"text": "a"}) + "\n")
    assert DecontaminateSettings(tasks=(str(tmp_path / "t.jsonl"),)).tasks_sha256


def test_one_word_ngrams_are_found_anywhere():
    index = Index.build([{("river",), ("old", "town")}])
    assert index.find(["a", "river", "b"]) == (1, 1) and index.find(["the", "old", "town"]) == (1, 2)
    assert index.find(["x", "river"]) == (1, 1) and index.find(["none"]) is None


def test_span_agrees_with_words():
    from curate.stages.decontaminate import plain_words, span

    text = "  -- Hello, World!  it's -- (fine) ... Ünïcode\tend."
    w, s, e = words(text)
    assert w == plain_words(text)
    for i in range(len(w)):
        for j in range(i, len(w)):
            assert span(text, i, j) == (s[i], e[j])
