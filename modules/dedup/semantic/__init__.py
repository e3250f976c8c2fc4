"""``semantic_dedup``: NeMo Curator's semantic dedup (SemDeDup) on CPU workers, in bounded memory.

``curate dedup semantic --input D --output OUT --model PATH | --embeddings DIR [--clusters 1000]
[--eps 0.01] [--fit-sample N] [--keep hard|easy|random|smallest-id] [--rule nemo|greedy] [--seed S]
[--max-tokens N] [--batch-size N] [--dtype float32|float16] [--block-size 1024]``

One concern per module: :mod:`.settings`, :mod:`.encoders` (the static and Hugging Face encoders),
:mod:`.embed` (step 1), :mod:`.cluster` (steps 2-4), :mod:`.compare` (step 5, the rules) and
:mod:`.stage`, which runs them in order. Steps, each Parquet under ``OUT.side/_work/<step>/`` (resumable,
see :mod:`curate.stages.dedup`):

1. ``embeddings``: per input partition, (doc, id, weight, vector) of every document not dropped
   upstream; skipped with ``--embeddings DIR`` (an earlier run's folder, read in its place).
2. ``sample``: per embeddings part, the documents of the fit sample (seeded hash of the id).
3. ``centroids``: one task, spherical k-means on the sample (``--clusters``, fewer for a small job).
4. ``clusters``: per embeddings part, each document's cluster, distance to its centroid and rank key,
   sorted by cluster (``sizes/`` beside: rows per cluster).
5. ``duplicates``: one task per range of consecutive clusters of about ``COMPACT_BYTES`` of vectors,
   reading only those clusters' row groups of every part; within each cluster the members in
   ``--keep`` order, compared in blocks (:mod:`.compare`: NeMo's rule or the greedy one). Writes
   (doc, id, kept_id, removed, size, cosine, cluster) and ``OUT.side/_duplicates/`` (id, kept_id, cosine,
   cluster, nearest_id) of every removed document.
6. The removed documents go back to their input partitions and are dropped as
   ``semantic_duplicate`` (``_detail``: ``duplicate of KEPT_ID``); output partition i is input
   partition i, the same bytes for any number of workers.

Memory: a task holds one embeddings part, the sample (``fit_sample`` vectors) or its clusters'
vectors (about ``COMPACT_BYTES``; a single cluster larger than that is held whole) and
``block_size``^2 similarities at a time.
"""
