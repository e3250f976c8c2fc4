"""``tokenize --keep-empty --no-append-eod`` writes what NeMo Curator's MegatronTokenizerWriter writes.

The oracle is NeMo's writer transcribed from its source (``write_data`` / ``write_idx_data``, NeMo
Curator 1.4): every document, empty ones too, becomes one sequence of ``encode(text)`` (plus eod when
``append_eod``), concatenated; the index is the Megatron header, int32 lengths, int64 byte pointers,
``arange(n + 1)`` document indices. It shares no code with modules/tokenize.
"""

import struct

import numpy as np

from curate.stages.tokenize.load import load_tokenizer
from curate.stages.tokenize.writer import frame_documents
from tests.conftest import run_stage, write_jsonl

TEXTS = ["Hello world.", "", "The quick brown fox.", "   ", "Ünïcödé 日本語"]


def nemo_pair(tok, texts, append_eod):
    """(bin bytes, idx bytes) as NeMo's MegatronTokenizerWriter builds them for one batch of texts."""
    dtype, code = (np.uint16, 8) if tok.vocab_size <= 65536 else (np.int32, 4)
    seqs = [list(ids) + ([tok.eod_id] if append_eod else []) for ids in tok.encode_batch(texts)]
    binary = b"".join(np.array(s, dtype=dtype).tobytes() for s in seqs)
    lengths = np.array([len(s) for s in seqs], dtype=np.int32)
    pointers = np.concatenate([[0], np.cumsum(lengths[:-1].astype(np.int64) * np.dtype(dtype).itemsize)])
    idx = (b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", code) + struct.pack("<Q", len(seqs))
           + struct.pack("<Q", len(seqs) + 1) + lengths.tobytes() + pointers.astype(np.int64).tobytes()
           + np.arange(len(seqs) + 1, dtype=np.int64).tobytes())
    return binary, idx


def test_frame_documents_keep_empty():
    # edge cases: an empty document becomes [eod], or a zero-length sequence without eod
    tokens, lengths, empty = frame_documents([[5, 6], [], [7]], np.uint16, 100, eod_id=0, keep_empty=True)
    assert tokens.tolist() == [5, 6, 0, 0, 7, 0] and lengths.tolist() == [3, 1, 2] and not empty.any()
    tokens, lengths, empty = frame_documents([[5, 6], [], [7]], np.uint16, 100, keep_empty=True)
    assert tokens.tolist() == [5, 6, 7] and lengths.tolist() == [2, 0, 1] and not empty.any()


def test_keep_empty_no_eod_is_byte_identical_to_nemo(tmp_path, bpe_dir):
    write_jsonl(tmp_path / "in.jsonl", [{"id": f"d{i}", "text": t} for i, t in enumerate(TEXTS)])
    tok = load_tokenizer(bpe_dir)
    for eod in (False, True):
        out = tmp_path / f"out{eod}"
        m = run_stage("tokenize", {"tokenizer": bpe_dir, "keep_empty": True, "append_eod": eod},
                      tmp_path / "in.jsonl", out)
        binary, idx = nemo_pair(tok, TEXTS, append_eod=eod)
        assert (out / "part_00000.bin").read_bytes() == binary
        assert (out / "part_00000.idx").read_bytes() == idx
        assert m["counts"]["out"] == len(TEXTS) and m["counts"]["dropped"] == {}
    # the default still skips empty documents (and counts them)
    m = run_stage("tokenize", {"tokenizer": bpe_dir}, tmp_path / "in.jsonl", tmp_path / "default")
    n_empty = sum(1 for ids in tok.encode_batch(TEXTS) if not ids)
    assert n_empty >= 1 and m["counts"]["dropped"] == {"empty": n_empty}
