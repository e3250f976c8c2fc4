"""curate's stages: pure functions over pandas partitions, plus the dataset contract.

Nothing in this package creates a Dask client, reads argv or imports ``app``.
"""
