"""Downloading raw data: Common Crawl, Wikipedia dumps, arXiv sources, or any list of URLs.

Every download stage plans its files on the client, downloads them as Dask tasks with the one
resumable downloader (:mod:`modules.download.http`) and extracts each with the matching extractor
of :mod:`modules.extract` (:mod:`modules.download.base`).
"""
