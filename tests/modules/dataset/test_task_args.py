"""delayed_call: a task's delayed arguments lifted out of its lists, tuples, dicts and dataclasses, each
computed once, and put back in their places."""

import time
from dataclasses import dataclass

import dask
import pandas as pd
import pytest

from curate.stages.dataset.task_args import delayed_call, land, lift


@dataclass(frozen=True)
class Holder:
    frame: object
    n: int


def _echo(*args, **kwargs):
    return args, kwargs


def test_delayed_objects_anywhere_in_the_arguments_are_computed_in_place():
    calls = []

    def make(x):
        calls.append(x)
        return pd.DataFrame({"x": [x]})

    a = dask.delayed(make, pure=False)(1)
    b = dask.delayed(make, pure=False)(2)
    args, kwargs = delayed_call(_echo, [Holder(a, 0), Holder(a, 1)], (b, "s"), {"k": [a]}, 7,
                                extra=Holder(b, 2)).compute(scheduler="sync")
    holders, pair, mapping, seven = args
    assert [h.n for h in holders] == [0, 1] and all(h.frame["x"].tolist() == [1] for h in holders)
    assert pair[0]["x"].tolist() == [2] and pair[1] == "s"
    assert mapping["k"][0]["x"].tolist() == [1] and seven == 7
    assert kwargs["extra"].frame["x"].tolist() == [2] and kwargs["extra"].n == 2
    assert sorted(calls) == [1, 2]  # each delayed object once, however often it occurs


def test_lift_keeps_objects_without_delayed_ones_and_land_is_its_inverse():
    h = Holder("no delayed", 3)
    plain = ([1, "a", h], {"k": (2, 3)})
    lifted, found = lift(plain)
    assert found == [] and lifted is plain  # nothing rebuilt: the same objects travel
    d = dask.delayed(int)("5")
    lifted, found = lift(([d, h], {"k": d}))
    assert len(found) == 1 and lifted[0][1] is h
    assert land(lifted, [5]) == ([5, h], {"k": 5})


def test_other_dask_collections_are_refused():
    import dask.dataframe as dd

    ddf = dd.from_pandas(pd.DataFrame({"x": [1, 2]}), npartitions=1)
    with pytest.raises(TypeError, match="DataFrame"):
        delayed_call(_echo, [ddf])


def test_the_client_does_not_pay_for_many_routed_rows_sharing_a_frame():
    """The case that cost the head 0.2 CPU-s: one task given many dataclasses holding the same frame of a
    shuffle graph. Lifted, building it costs about as much as a task of one argument."""
    import dask.dataframe as dd

    from curate.stages.dedup import routing

    df = pd.DataFrame({"doc": [(p << 32) + r for p in range(48) for r in range(3)], "x": 1})
    routed = routing.route_to_groups(dd.from_pandas(df, npartitions=48), "doc", 48, 1)
    started = time.process_time()
    for _ in range(5):
        task = delayed_call(_echo, routed)
    built = (time.process_time() - started) / 5
    (got,), _ = task.compute(scheduler="sync")
    assert [len(r.rows()) for r in got] == [3] * 48
    assert built < 0.05
