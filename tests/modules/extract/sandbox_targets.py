"""Functions the sandbox's child runs in tests: importable by name, as the child imports them."""

from __future__ import annotations

import os
import signal
import time


def add(a, b):
    return a + b


def sleep_forever():
    while True:
        time.sleep(1)


def eat_memory(n_bytes):
    return len(bytearray(n_bytes))


def crash():
    os.kill(os.getpid(), signal.SIGSEGV)


def fail(message):
    raise ValueError(message)


def pid():
    return os.getpid()


def hanging_page_row(settings, row, payload, charset, where):
    """The real page extraction, except for pages that carry a marker: one hangs, one eats memory."""
    from curate.stages.extract.warc import page_row

    if b"HANG-ME" in payload:
        sleep_forever()
    if b"EAT-MEMORY" in payload:
        eat_memory(8 << 30)
    return page_row(settings, row, payload, charset, where)


def hanging_wikitext(wikitext, drop, tables):
    from curate.stages.extract.wikitext import wikitext_to_text

    if "HANG-ME" in wikitext:
        sleep_forever()
    return wikitext_to_text(wikitext, drop, tables=tables)


def hanging_paper_text(sources, max_chars):
    from curate.stages.extract.latex import paper_text

    if any(b"HANG-ME" in data for data in sources.values()):
        sleep_forever()
    return paper_text(sources, max_chars)


def slow_first_call(marker, value):
    """Slow once per machine (a cold disk cache, a model loaded on first use): the first call sleeps 3 s."""
    if not os.path.exists(marker):
        open(marker, "w").close()
        time.sleep(3)
    return value


def hang_if(value):
    if value == "hang":
        sleep_forever()
    return value


def announced_hanging_page_row(settings, row, payload, charset, where):
    """hanging_page_row that first writes the child's pid to the file ``CURATE_TEST_HANG_FILE`` names."""
    if b"HANG-ME" in payload:
        with open(os.environ["CURATE_TEST_HANG_FILE"] + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace(os.environ["CURATE_TEST_HANG_FILE"] + ".tmp", os.environ["CURATE_TEST_HANG_FILE"])
    return hanging_page_row(settings, row, payload, charset, where)
