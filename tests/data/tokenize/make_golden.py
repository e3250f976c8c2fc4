"""Make the golden Megatron files in this folder with Megatron-Core itself (not run by the tests).

    python -m venv /tmp/mcore && /tmp/mcore/bin/pip install torch==2.13.0 megatron-core
    /tmp/mcore/bin/python tests/data/tokenize/make_golden.py            # (re)write the golden files
    /tmp/mcore/bin/python tests/data/tokenize/make_golden.py --read DIR # read our output with IndexedDataset

The golden files were made with megatron-core 0.16.1 and torch 2.13.0+cpu:
- u16.bin/.idx and i32.bin/.idx: the documents of golden_docs.json, one ``add_document`` each, with
  ``IndexedDatasetBuilder(dtype=numpy.uint16)`` / ``numpy.int32``;
- u16_merged.bin/.idx: the first two uint16 documents and the last two written as two datasets and
  merged with ``add_index`` (what tools/merge_datasets.py does).
"""

import json
import os
import sys
import tempfile

import numpy
import torch
from megatron.core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetBuilder

HERE = os.path.dirname(os.path.abspath(__file__))


def write(prefix, docs, dtype):
    b = IndexedDatasetBuilder(prefix + ".bin", dtype=dtype)
    for d in docs:
        b.add_document(torch.tensor(d, dtype=torch.int64), [len(d)])
    b.finalize(prefix + ".idx")


def main():
    with open(os.path.join(HERE, "golden_docs.json")) as f:
        docs = json.load(f)
    write(os.path.join(HERE, "u16"), docs["uint16"], numpy.uint16)
    write(os.path.join(HERE, "i32"), docs["int32"], numpy.int32)
    with tempfile.TemporaryDirectory() as tmp:
        write(os.path.join(tmp, "a"), docs["uint16"][:2], numpy.uint16)
        write(os.path.join(tmp, "b"), docs["uint16"][2:], numpy.uint16)
        out = os.path.join(HERE, "u16_merged")
        b = IndexedDatasetBuilder(out + ".bin", dtype=numpy.uint16)
        b.add_index(os.path.join(tmp, "a"))
        b.add_index(os.path.join(tmp, "b"))
        b.finalize(out + ".idx")
    for name, key in (("u16", "uint16"), ("i32", "int32"), ("u16_merged", "uint16")):
        ds = IndexedDataset(os.path.join(HERE, name))
        assert [ds[i].tolist() for i in range(len(ds))] == docs[key], name


def read(folder):
    """Open every pair in ``folder`` with Megatron's IndexedDataset and print what it sees."""
    prefixes = sorted(os.path.join(folder, n[:-4]) for n in os.listdir(folder) if n.endswith(".idx"))
    for prefix in prefixes:
        ds = IndexedDataset(prefix)
        tokens = sum(len(ds[i]) for i in range(len(ds)))
        print(f"{os.path.basename(prefix)}: {len(ds)} sequences, {len(ds.document_indices) - 1} documents, "
              f"{tokens} tokens, dtype {ds.index.dtype.__name__}, first {ds[0][:8].tolist()}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--read":
        read(sys.argv[2])
    else:
        main()
