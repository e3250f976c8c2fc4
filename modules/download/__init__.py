"""Downloading raw data: Common Crawl, Wikipedia dumps, arXiv sources, or any list of URLs.

Every download stage plans its files on the client, then streams each remote file (one Dask task
per file, :mod:`curate.stages.download.stream`: resumed at the exact byte after a dropped connection)
straight into the matching extractor of :mod:`curate.stages.extract` and writes its documents as one
partition (:mod:`curate.stages.download.base`). Nothing lands on disk unless ``--keep-raw``.
"""
