"""The ``fuzzy_dedup`` stage: its steps in order (what each does: the package doc)."""

from __future__ import annotations

import pandas as pd

from curate.stages import dedup
from curate.stages.dedup import keep as keeping
from curate.stages.dedup.fuzzy.against import (
    Joint,
    _anchors_task,
    _expanded_task,
    _index_part_column,
    _matched_task,
    attach_members,
)
from curate.stages.dedup.fuzzy.candidates import ANCHORS, _centers_task, _dedupe_edges, _star_edges_of_run
from curate.stages.dedup.fuzzy.decide import _duplicates_task, _members_task, attach_ids
from curate.stages.dedup.fuzzy.rounds import refine_removals
from curate.stages.dedup.fuzzy.saved_index import save_index
from curate.stages.dedup.fuzzy.settings import REASON, FuzzyDedupSettings
from curate.stages.dedup.fuzzy.signatures import _signatures_task
from curate.stages.dedup.fuzzy.verify import SetStore, _verify_task
from curate.stages.stage import Stage


def _signatures_of_input(inputs, i, partition, folder, sets, settings, buckets):
    # the task reads its input partition itself and writes its band keys: one task per partition, not
    # a read, a signature and a bucket task
    return _signatures_task(inputs.read(i), partition, folder, sets, settings, inputs.pieces[i].path, buckets)


def _attach_group(routed, sig_paths, verified_paths):
    # a partition without members reads neither its ids nor its verified edges: one task does a whole
    # group, and a sparse component graph leaves most partitions of it empty (the first stands in when
    # all are, for the frame's columns)
    rows = [r.rows() for r in routed]
    todo = [k for k, r in enumerate(rows) if len(r)] or [0]
    frames = [attach_ids(rows[k], sig_paths[k], verified_paths[k] if verified_paths else None) for k in todo]
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


class FuzzyDedupStage(Stage):
    """Remove near duplicates (MinHash-LSH), keeping one document (``--keep``) of each connected component
    (with --false-positive-check: of each group of documents verified similar to the kept one, no two
    kept documents of a component similar)."""

    worker_imports = ("curate.stages.dedup.shingles", "curate.stages.dedup.lsh", "curate.stages.dedup.union_find",
                      "curate.stages.dedup.hashing:warm")
    name = "fuzzy_dedup"
    Settings = FuzzyDedupSettings
    cli = ("dedup", "fuzzy")
    help = "remove near duplicates (MinHash-LSH + connected components), keep one per group (--keep; default the one similar to the most others)"
    adds = ("dup_cluster_size",)

    def columns(self, settings):
        from curate.stages.dedup import keep as keeping
        from curate.stages.stage import Columns

        column = keeping.parse(settings.keep).column
        return Columns(needs=("text",) + ((column,) if column else ()), adds=self.adds)

    def check(self, settings, inputs) -> None:
        keeping.check_inputs(keeping.parse(settings.keep), inputs)

    def check_output(self, settings, inputs, output) -> None:
        # here, not in check: a job calls this for every stage, also one whose input is not written yet
        from curate.stages.dedup import index

        if settings.against:
            index.check_against(settings.against, "fuzzy", index.settings_record("fuzzy", settings,
                                                                                  *settings.lsh_params()), inputs)
        index.check_save(settings.save_index, inputs, settings.against, output)

    def run(self, settings, ctx) -> dict:
        import contextlib

        from curate.stages.dedup import index

        with index.lock(settings.save_index) if settings.save_index else contextlib.nullcontext():
            return self._run(settings, ctx)

    def _run(self, settings, ctx) -> dict:
        import dask
        import dask.dataframe as dd

        from curate.stages import dataset
        from curate.stages.dedup import components, index
        from curate.stages.dedup.components import EDGE_META

        bands, rows = settings.lsh_params()
        record = index.settings_record("fuzzy", settings, bands, rows)
        bases = tuple(index.check_against(settings.against, "fuzzy", record, ctx.input, verify=False))
        offset = sum(b.partitions for b in bases)
        joint = Joint(tuple(b.slim() for b in bases), offset, (bases[-1].tier0 + len(bases[-1].tiers)) if bases else 0)
        inputs = dedup.Inputs(ctx)  # the pieces, planned once; each task reads its own
        nparts = len(inputs)
        steps = dedup.Steps(ctx, self.name)

        # this run's documents are numbered after the indexes': partition offset + i. The one step that
        # reads texts: signatures and, beside them, the shingle sets every later comparison reads and
        # the band keys
        sets, keys = steps.side("shingles", "signatures"), steps.side("buckets", "signatures")
        steps.run("signatures", lambda folder: dedup.input_tasks(inputs, _signatures_of_input, [
            (inputs.only(i), i, offset + i, folder, sets, settings, (keys, i, bands, rows)) for i in range(nparts)]),
            extra_dirs=(sets, keys))
        sig_files = dedup.list_parts(steps.path("signatures"))
        store = SetStore(joint, tuple(sig_files), sets)
        sample = None
        if settings.audit_sample and settings.false_positive_check:  # the rounds' sets are there to compare
            from curate.stages.dedup.fuzzy import audit as auditing

            # the audit's sample and its close pairs need only the sets: on a cluster they are computed
            # now, beside the steps that follow, each one task (at 6 quarter-core nodes the audit was
            # one task of 1.7 s after the removal's writes had begun); its decisions come at the end
            sample = dask.delayed(auditing.audit_sample, pure=False)(
                store, range(offset, offset + nparts), settings.threshold, settings.audit_sample)
            sampling = ctx.run_beside(sample)  # its future keeps the result for the audit's task

        buckets = dedup.read_compact(keys)
        width = dedup.compact_partitions(keys)  # every shuffle of compact rows: by their bytes
        if bases:  # the indexes' centers of this run's bucket keys join the buckets as members
            def centers(folder):
                task, tasks = dask.delayed(_matched_task, pure=False), []
                for b in joint.bases:
                    routed = index.routed_rows([buckets[["bucket"]]], "bucket", b.parts)
                    tasks += [task(r, b, i, folder, len(tasks) + i) for i, r in enumerate(routed)]
                return tasks

            steps.run("index-centers", centers)
            buckets = dd.concat([buckets, dedup.read_parts(steps.path("index-centers"))], ignore_unknown_divisions=True)
        new_centers = steps.side("centers", "edges") if settings.save_index else None

        def edges(folder):
            shuffled = dedup.shuffle(buckets, "bucket", width)
            anchors = ANCHORS if settings.false_positive_check else 1
            star = shuffled.map_partitions(_star_edges_of_run, joint, anchors, meta=EDGE_META)
            tasks = dedup.save_tasks(dedup.shuffle(star, "u", width), folder, _dedupe_edges)
            if new_centers is not None:
                task = dask.delayed(_centers_task, pure=False)
                tasks += [task(part, joint, new_centers, i) for i, part in enumerate(shuffled.to_delayed())]
            return tasks

        steps.run("edges", edges, extra_dirs=(new_centers,) if new_centers is not None else ())
        graph = ["edges"]

        if settings.false_positive_check:
            def verified(folder):  # each edge where its larger end lives (the smaller is anywhere)
                edges = steps.path("edges")
                routed = dedup.route_to_groups(dedup.read_compact(edges), "u", offset + nparts,
                                               dedup.compact_partitions(edges))
                return dedup.group_tasks(routed, _verify_task, (store, settings.threshold, folder),
                                         dedup.spread(ctx.slots, steps.done("edges")["rows"]))

            steps.run("verified", verified)
            graph = ["verified"]

        if bases:  # an index document reached by an edge brings its component in the index along
            def anchors(folder):
                ends = dedup.read_parts(steps.path(graph[0]), columns=["v"])
                routed = dedup.route_to_input(ends, "v", offset + nparts)
                task = dask.delayed(_anchors_task, pure=False)
                return [task(r, joint, p, folder) for p, r in enumerate(routed) if p < offset]

            steps.run("anchors", anchors)
            graph.append("anchors")

        cc = components.run(steps, graph, "components", settings.in_memory_edges)

        if bases:  # every member of those index components, with the joint component
            def expanded(folder):
                comps = dedup.read_parts(steps.path("components"), columns=["doc", "comp"])
                nodes = comps.rename(columns={"doc": "label"})
                task, tasks = dask.delayed(_expanded_task, pure=False), []
                for b in joint.bases:
                    lo, hi = b.offset << dedup.DOC_SHIFT, (b.offset + b.partitions) << dedup.DOC_SHIFT
                    mine = nodes[(nodes["label"] >= lo) & (nodes["label"] < hi)]
                    mine = mine.map_partitions(_index_part_column, b, meta=mine._meta.assign(
                        _part=pd.Series([], dtype="int64")))
                    tasks += [task(r, b, i, folder, len(tasks) + i)
                              for i, r in enumerate(dedup.route_to_parts(mine, "_part", b.parts))]
                return tasks

            steps.run("expanded", expanded)

        def members(folder):
            comps = dedup.read_compact(steps.path("components"), columns=["doc", "comp"])
            groups = dedup.compact_partitions(steps.path("components"))
            meta = pd.DataFrame({"doc": pd.Series([], dtype="int64"), "comp": pd.Series([], dtype="int64"),
                                 "id": pd.Series([], dtype=dataset.STRING), "key": pd.Series([], dtype="float64"),
                                 "weight": pd.Series([], dtype="int64")})
            if bases:
                more = dedup.read_parts(steps.path("expanded"), columns=["doc", "comp"])
                comps = dd.concat([comps, more], ignore_unknown_divisions=True)
                attach = dask.delayed(attach_members, pure=True)
                with_ids = [attach(c, p, joint, sig_files, verified[p] if verified else None)
                            for p, c in enumerate(dedup.route_to_input(comps, "doc", offset + nparts))]
                meta = meta.assign(tier=pd.Series([], dtype="int64"))
            else:
                # a task per run of input partitions of a group (split so that every thread has one:
                # a group's runs spread over the workers, dedup.group_tasks): they need only its compact
                # rows and, one partition at a time, their ids and keys. The members' parts are the
                # same however they are split: each is sorted by a total order (keep.rank_order)
                from curate.stages.dataset.task_args import delayed_call

                routed = dedup.route_to_groups(comps, "doc", nparts, groups)
                with_ids = [delayed_call(_attach_group, [routed[p] for p in run], [sig_files[p] for p in run],
                                         [verified[p] for p in run] if verified else None)
                            for run in dedup.split_runs(routed, dedup.spread(ctx.slots, steps.done("components")["rows"]))]
            if verified:
                meta = meta.assign(loose=pd.Series([], dtype="bool"))
            by_comp = dedup.shuffle(dd.from_delayed(with_ids, meta=meta, divisions=[None] * (len(with_ids) + 1),
                                                    verify_meta=False), "comp", groups)
            task = dask.delayed(_members_task, pure=False)
            return [task(part, folder, i) for i, part in enumerate(by_comp.to_delayed())]

        # with the check: which documents joined by a loose edge (verified part p: partition p's)
        verified = dedup.list_parts(steps.path("verified")) if settings.false_positive_check else None
        steps.run("members", members)

        if settings.false_positive_check:
            decisions, refine_rounds = refine_removals(steps, store, settings, joint, offset + nparts)
            # a group's size needs all its members: one shuffle, as wide as the members' bytes ask
            decisions = dedup.shuffle(decisions, "component", dedup.compact_partitions(steps.path("members")))
        else:
            decisions, refine_rounds = dedup.read_parts(steps.path("members")), 0

        audit = steps.folder(dedup.DUPLICATES)
        info = steps.run("duplicates", lambda folder: [
            dask.delayed(_duplicates_task, pure=False)(part, folder, audit, i, joint)
            for i, part in enumerate(decisions.to_delayed())], extra_dirs=(audit,))
        mine = sum(p.get("mine", p["rows"]) for p in info["parts"])
        removed = sum(p.get("removed", 0) for p in info["parts"])
        extra = {
            "dedup": {
                "bands": bands, "rows": rows, "threshold": settings.threshold,
                "signatures": steps.done("signatures")["rows"],
                "edges": steps.done("edges")["rows"],
                "verified_edges": steps.done("verified")["rows"] if settings.false_positive_check else None,
                "components": sum(p["components"] for p in steps.done("members")["parts"]),
                "documents_in_components": mine,
                "kept_in_components": mine - removed,
                "removed": removed,
                "refine_rounds": refine_rounds,
                # documents joined by a loose edge
                "loose_edges": sum(p.get("loose", 0) for p in steps.done("verified")["parts"])
                if settings.false_positive_check else None,
                "connected_components": cc,
            },
            "steps": steps.timings,
        }
        audit = None
        if sample is not None:
            # in a task (no work for the head), beside the removal's writes: alone it kept one worker
            # busy while the others waited (3.3 s of a 27 s stage at 6 quarter-core nodes); its place
            # in the manifest is kept here
            audit = ctx.run_beside(dask.delayed(auditing.audit_run, pure=False)(
                store, range(offset, offset + nparts), tuple(dedup.list_parts(steps.path("duplicates"))),
                settings.threshold, settings.audit_sample, sample))
            del sampling  # the audit's task holds the sample now
            extra["dedup"].update(audit=None, component_sizes=None)
        if bases:
            extra["dedup"]["against"] = {
                "indexes": [b.label for b in bases], "index_members": info["rows"] - mine,
                "removed_for_index": sum(p.get("removed_for_index", 0) for p in info["parts"])}
        if settings.save_index:
            extra["dedup"]["saved_index"] = save_index(settings, ctx, steps, joint, bases, inputs, sig_files, record)
        from curate.stages.dedup import removal
        marked = removal.removal_frame(inputs, steps, "duplicates", REASON, offset)

        def audited() -> dict:
            if audit is not None:
                extra["dedup"]["audit"], extra["dedup"]["component_sizes"] = audit()
            return extra

        return dataset.write_dataset(marked, ctx, stage=self.name, settings=settings,
                                     reject_columns=("id",), extra=audited, records=steps.records())
