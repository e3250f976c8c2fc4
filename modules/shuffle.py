"""``shuffle``: a seeded global shuffle that reshards the dataset into N partitions of about equal size.

Source files are often sorted (by length, topic, crawl date, repository); tokenized as they are,
the training batches that Megatron draws from neighbouring documents look alike. This stage puts
every document at a random place, deterministically.

How: each document gets a key, the xxh64 of its UTF-8 id with the seed, shifted into [0, 2**53).
The keys are uniform, so cutting the key space into N equal ranges gives N partitions of about
equal size (in documents) without a pass to measure the data; partition j holds the keys of the
j-th range, in key order. The order therefore depends only on the set of ids and the seed: not on
how the input was partitioned, the number of workers or the order tasks ran in. With Dask it is
one ``set_index`` with known divisions (a shuffle, then a sort inside each partition); the pure
pandas version (:func:`shuffle_frame`) gives the same order for a frame that fits in memory.

Rows dropped upstream travel with the others and end up in ``_rejects/`` as usual.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from curate.stages.stage import Stage, check_range

#: shuffle keys are in [0, 2**53): exact as integers and as the float divisions Dask may compare them with
KEY_BITS = 53
KEY = "_shuffle_key"


def hash_ids(ids: pd.Series, seed: int = 0) -> np.ndarray:
    """xxh64 of each id's UTF-8 bytes with ``seed``, as uint64.

    A published hash rather than pandas' internal one, so an id's key (and the tokenizer's
    train/validation split, which uses it with its own seed) can be recomputed anywhere, in any language.
    """
    import xxhash

    h = xxhash.xxh64_intdigest
    # one C call per id; there is no vectorised xxh64 in pandas or pyarrow
    return np.fromiter((h(str(i).encode("utf-8"), seed) for i in ids.tolist()), dtype=np.uint64, count=len(ids))


def shuffle_keys(ids: pd.Series, seed: int) -> np.ndarray:
    return (hash_ids(ids, seed) >> np.uint64(64 - KEY_BITS)).astype(np.int64)


def divisions(n: int) -> list[int]:
    """Boundaries that cut the key space into ``n`` equal ranges (the last one inclusive)."""
    space = 1 << KEY_BITS
    return [j * space // n for j in range(n)] + [space - 1]


MAX_PARTITIONS = 100_000


@dataclass(frozen=True)
class ShuffleSettings:
    partitions: int | None = field(
        default=None, metadata={"help": "output partitions (default: as many as the input has)", "metavar": "N"}
    )
    seed: int = field(default=0, metadata={"help": "seed of the shuffle; the same seed gives the same order",
                                           "metavar": "S"})

    def __post_init__(self):
        # a partition is a task and an output file: beyond this a typo (1000000000) costs a MemoryError
        # after a long graph build instead of an error line
        check_range(self, "partitions", lo=1, hi=MAX_PARTITIONS)
        check_range(self, "seed", lo=0, hi=2**64 - 1)


def add_key(df: pd.DataFrame, seed: int) -> pd.DataFrame:
    return df.assign(**{KEY: shuffle_keys(df["id"], seed)})


def shuffle_frame(df: pd.DataFrame, settings: ShuffleSettings) -> pd.DataFrame:
    """The whole shuffle in pandas: the rows in the order the Dask version writes them."""
    keyed = add_key(df, settings.seed)
    return keyed.sort_values(KEY, kind="stable").drop(columns=[KEY]).reset_index(drop=True)


def shuffle_dask(ddf, settings: ShuffleSettings):
    n = settings.partitions or ddf.npartitions
    meta = add_key(ddf._meta, settings.seed)
    keyed = ddf.map_partitions(add_key, settings.seed, meta=meta)
    return keyed.set_index(KEY, divisions=divisions(n)).reset_index(drop=True)


class ShuffleStage(Stage):
    name = "shuffle"
    needs = ()
    Settings = ShuffleSettings
    help = "seeded global shuffle, resharded into N partitions of about equal size"

    def run(self, settings, ctx):
        from curate.stages import dataset

        ddf = dataset.read_dataset(ctx.input, ctx.io)
        out = shuffle_dask(ddf, settings)
        return dataset.write_dataset(
            out, ctx, stage=self.name, settings=settings,
            extra={"shuffle": {"seed": settings.seed, "partitions": out.npartitions,
                               "input_partitions": ddf.npartitions}},
        )
