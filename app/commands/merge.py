"""``curate merge DIR --output PREFIX``: one ``.bin``/``.idx`` from every pair in DIR.

The same bytes as Megatron's ``tools/merge_datasets.py`` for the pairs in name order, written by
streaming (memory does not grow with the data), and beside them the pairs' document sidecars
concatenated (``PREFIX.docs.parquet``). A directory written with ``--split`` holds
several sets: merge one with ``--prefix train`` (or validation, test).
"""

from __future__ import annotations

HELP = "concatenate a directory's Megatron pairs into one .bin/.idx (streaming)"


def add_arguments(p) -> None:
    p.add_argument("dir", metavar="DIR", help="tokenize output directory (local or URL)")
    p.add_argument("--output", required=True, metavar="PREFIX",
                   help="writes PREFIX.bin, PREFIX.idx and PREFIX.docs.parquet")
    p.add_argument("--prefix", default=None, metavar="NAME", help="merge only the pairs NAME_00000... (one set)")


def main(args) -> int:
    from curate.stages.tokenize.merge import merge

    stats = merge(args.dir, args.output, prefix=args.prefix)
    files = ".bin/.idx/.docs.parquet" if stats["docs"] else ".bin/.idx"
    print(f"curate merge: {stats['files']} files -> {stats['output']}{files}: {stats['documents']:,} documents, "
          f"{stats['tokens']:,} tokens, {stats['dtype']}")
    if not stats["docs"]:
        print(f"note: {args.dir} has no document sidecars (written before curate recorded them): the merged "
              "tokens cannot be traced to document ids")
    return 0
