"""A task's arguments with the delayed objects in them lifted out: :func:`delayed_call`.

``dask.delayed(fn)(*args)`` walks every list, tuple, dict and dataclass of ``args`` on the client to find
delayed objects, and for each one it finds below the top level it builds and substitutes a task spec.
Dask's substitution is quadratic in the nesting: a verify step's one task, given the routed rows of 24
input partitions (each a :class:`curate.stages.dedup.Routed` holding the same shuffled frame), cost
the client 0.2 CPU-s to build at 48,000 pages, most of fuzzy dedup's head time on a quarter-core node.

Here the arguments are walked once by plain Python: each distinct delayed object becomes a top-level
argument of the task (Dask resolves those cheaply, each once however often it occurs), its places
are marked, and the rest travels as it is (:class:`Opaque`). The task
puts the computed values back in their places before it calls ``fn``.
"""

from __future__ import annotations

import dataclasses


class Opaque:
    """A task's arguments that hold no delayed object, passed to it as they are. Dask otherwise walks
    every list, tuple, dict and dataclass of every task's arguments on the client to find delayed
    objects (the pieces, settings and schemas of a group's partitions: more of the head's CPU than
    the task's scheduling)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __reduce__(self):
        return Opaque, (self.value,)


def unwrap(value):
    return value.value if isinstance(value, Opaque) else value


class _Slot:
    """The place of the ``k``-th lifted delayed object."""

    __slots__ = ("k",)

    def __init__(self, k: int):
        self.k = k

    def __reduce__(self):
        return _Slot, (self.k,)


def _map(value, fn):
    """``value`` with ``fn`` applied to every leaf of its lists, tuples, dicts and dataclasses; the same
    object where nothing below it changed."""
    out = fn(value)
    if out is not value:
        return out
    kind = type(value)
    if kind is list or kind is tuple:
        items = [_map(v, fn) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else kind(items)
    if kind is dict:
        items = {k: _map(v, fn) for k, v in value.items()}
        return value if all(items[k] is v for k, v in value.items()) else items
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            if f.init and hasattr(value, f.name):
                old = getattr(value, f.name)
                new = _map(old, fn)
                if new is not old:
                    changes[f.name] = new
        return dataclasses.replace(value, **changes) if changes else value
    return value


def lift(args):
    """(``args`` with every delayed object replaced by its place, the distinct delayed objects in order).
    Any other Dask collection in ``args`` is refused: it would travel uncomputed."""
    from dask.base import is_dask_collection
    from dask.delayed import Delayed

    found: list = []
    index: dict = {}

    def take(v):
        if isinstance(v, Delayed):
            k = index.get(v.key)
            if k is None:
                k = index[v.key] = len(found)
                found.append(v)
            return _Slot(k)
        if type(v) not in (list, tuple, dict) and is_dask_collection(v):
            raise TypeError(f"a task argument is a {type(v).__name__}: pass it as a delayed object")
        return v

    return _map(args, take), found


def land(args, values):
    """``args`` as :func:`lift` gave them, each place holding its computed value."""
    return _map(args, lambda v: values[v.k] if isinstance(v, _Slot) else v)


def _call_landed(fn, lifted, *values):
    args, kwargs = land(unwrap(lifted), values)
    return fn(*args, **kwargs)


def delayed_call(fn, *args, pure: bool = False, dask_key_name=None, **kwargs):
    """``dask.delayed(fn, pure=pure)(*args, **kwargs)`` whose arguments Dask does not walk (the module
    doc): the delayed objects in them, each once, are the task's own arguments."""
    import dask

    lifted, found = lift((args, kwargs))
    extra = {"dask_key_name": dask_key_name} if dask_key_name is not None else {}
    return dask.delayed(_call_landed, pure=pure)(fn, Opaque(lifted), *found, **extra)
