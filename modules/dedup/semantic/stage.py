"""The ``semantic_dedup`` stage: its steps in order (what each does: the package doc)."""

from __future__ import annotations

import logging

import numpy as np

from curate.stages import dedup
from curate.stages.dedup.semantic import cluster, compare, embed, resolve
from curate.stages.dedup.semantic.settings import REASON, SemanticDedupSettings
from curate.stages.errors import SettingsError
from curate.stages.stage import Stage

log = logging.getLogger(__name__)


def _rows(paths) -> int:
    return int(sum(embed.part_rows(paths)))


def size_histogram(sizes: np.ndarray) -> dict:
    """Clusters by size in powers of two: ``counts[i]`` clusters of [edges[i], edges[i+1]) members."""
    top = max(1, int(sizes.max()) if len(sizes) else 1)
    edges = [0, 1] + [1 << i for i in range(1, top.bit_length() + 1)]
    counts = np.histogram(sizes, bins=edges)[0]
    return {"edges": edges, "counts": counts.tolist(), "largest": int(top if len(sizes) else 0),
            "empty": int((sizes == 0).sum())}


class SemanticDedupStage(Stage):
    """Remove documents whose embedding is within eps (cosine) of an earlier member of their k-means
    cluster, NeMo Curator's semantic dedup on CPU workers."""

    name = "semantic_dedup"
    Settings = SemanticDedupSettings
    cli = ("dedup", "semantic")
    help = ("remove semantic near duplicates: embed (static or Hugging Face encoder), k-means, cosine >= 1 - eps "
            "within a cluster (--keep hard: the farthest from its centroid stays)")
    adds = ("dup_cluster_size",)

    def check(self, settings, inputs) -> None:
        if settings.embeddings:
            if not embed.embedding_parts(settings.embeddings):
                raise SettingsError(f"embeddings {settings.embeddings}: no part-*.parquet files")
        else:
            from curate.stages.dedup.semantic.encoders import model_kind

            model_kind(settings.model)

    def run(self, settings, ctx) -> dict:
        import dask

        from curate.stages import dataset

        ddf = dataset.read_dataset(ctx.input, ctx.io, rejects_dir=ctx.output)
        inputs = dedup.Inputs(ctx, ddf)
        nparts = len(inputs)
        steps = dedup.Steps(ctx, self.name)
        delayed = lambda f: dask.delayed(f, pure=False)  # noqa: E731

        if settings.embeddings:
            emb = embed.embedding_parts(settings.embeddings)
            if len(emb) != nparts:
                raise SettingsError(f"embeddings {settings.embeddings}: {len(emb)} parts for {nparts} input "
                                    "partitions (the same input and --blocksize as the run that wrote them)")
            if settings.model:
                log.info("semantic_dedup: --embeddings given, the model is not used")
        else:
            task = delayed(embed.embed_task)
            steps.run("embeddings", lambda folder: [task(inputs.only(i), i, folder, settings) for i in range(nparts)])
            emb = embed.embedding_parts(steps.path("embeddings"))
        documents, = ctx.run_compute(delayed(_rows)(tuple(emb)))
        k = cluster.clusters_for(max(documents, 1), settings.clusters)
        limit = cluster.sample_limit(documents, settings.fit_sample)

        sample = delayed(cluster.sample_task)
        steps.run("sample", lambda folder: [sample(p, limit, settings.seed, folder, i) for i, p in enumerate(emb)])
        samples = tuple(dedup.list_parts(steps.path("sample")))
        fitted = steps.run("centroids", lambda folder: [delayed(cluster.centroids_task)(
            samples, k, settings.seed, folder)] if documents else [])
        sizes_folder = steps.side("sizes", "clusters")

        def clusters(folder):
            if not documents:
                return []
            centroids = dedup.list_parts(steps.path("centroids"))[0]
            task = delayed(cluster.assign_task)
            return [task(p, centroids, settings.keep, settings.seed, folder, sizes_folder, i, k, settings.probes)
                    for i, p in enumerate(emb)]

        steps.run("clusters", clusters, extra_dirs=(sizes_folder,))
        parts = tuple(dedup.list_parts(steps.path("clusters")))
        (rows, sizes), = ctx.run_compute(delayed(cluster.cluster_sizes)(tuple(dedup.list_parts(sizes_folder)), k))
        dim = embed.part_dim(emb[0]) if emb else 1
        budget = max(settings.block_size, dedup.COMPACT_BYTES // (4 * dim + 64))
        ranges = compare.plan_ranges(rows, budget) if parts else []
        audit = steps.folder(dedup.DUPLICATES)
        candidates, links = steps.side("candidates", "duplicates"), steps.side("links", "duplicates")

        def duplicates(folder):
            task = delayed(compare.compare_task)
            if not ranges:  # no documents: one empty part, so the removal step has a table to read
                return [delayed(_empty_task)(folder, candidates, links)]
            return [task(parts, a, b, settings.threshold, settings.block_size, settings.rule, settings.eps,
                         folder, candidates, links, j) for j, (a, b) in enumerate(ranges)]

        info = steps.run("duplicates", duplicates, extra_dirs=(candidates, links))
        found = tuple(dedup.list_parts(steps.path("duplicates")))
        steps.run("resolve", lambda folder: [delayed(resolve.resolve_task)(
            found, tuple(dedup.list_parts(links)), folder)])
        resolved = dedup.list_parts(steps.path("resolve"))[0]
        steps.run("audit", lambda folder: [delayed(resolve.audit_task)(c, resolved, audit, j) for j, c in
                                           enumerate(dedup.list_parts(candidates))], extra_dirs=(audit,))
        removed = sum(p.get("removed", 0) for p in info["parts"])
        cosines = np.sum([p["cosines"] for p in info["parts"] if "cosines" in p], axis=0).tolist() \
            if removed else [0] * compare.COSINE_BINS
        centroid_info = (fitted["parts"] or [{}])[0]
        extra = {"dedup": {
            "model": settings.model if not settings.embeddings else None, "embeddings": settings.embeddings,
            "dimensions": dim, "documents": documents, "clusters_requested": settings.clusters,
            "clusters": k, "fit_sample": centroid_info.get("sample", 0),
            "kmeans_rounds": centroid_info.get("rounds", 0), "eps": settings.eps, "keep": settings.keep,
            "rule": settings.rule, "probes": settings.probes, "removed": removed, "cluster_sizes": size_histogram(sizes),
            "removed_cosines": {"edges": np.linspace(1 - settings.eps, 1, compare.COSINE_BINS + 1).round(6).tolist(),
                                "counts": cosines}},
            "steps": steps.timings}
        from curate.stages.dedup import removal
        marked = removal.removal_frame(inputs, steps, ("duplicates", "resolve"), REASON)
        return dataset.write_dataset(marked, ctx, stage=self.name, settings=settings, reject_columns=("id",),
                                     extra=extra, records=steps.records())


def _empty_task(folder, candidates, links) -> dict:
    import pyarrow as pa

    from curate.stages.dedup.semantic.compare import compare_range

    empty = pa.table({"doc": pa.array([], pa.int64()), "id": pa.array([], pa.string()),
                      "cluster": pa.array([], pa.int32()), "distance": pa.array([], pa.float32()),
                      "key": pa.array([], pa.float64()), "weight": pa.array([], pa.int64()),
                      "witness": pa.array([], pa.bool_()), embed.VECTOR: pa.array([], pa.list_(pa.float32(), 1))})
    dups, trail, linked, _ = compare_range(empty, 1.0, 16, "nemo")
    stats = dedup.save_part(dups, folder, 0)
    stats["outputs"] = (stats.get("outputs", []) + dedup.save_part(trail, candidates, 0).get("outputs", [])
                        + dedup.save_part(linked, links, 0).get("outputs", []))
    return stats
