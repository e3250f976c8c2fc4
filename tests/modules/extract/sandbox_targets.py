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


def hanging_page(settings, payload, charset):
    """The real page extraction, except for pages that carry a marker: one hangs, one eats memory."""
    from curate.stages.extract.warc import page_outcome

    if b"HANG-ME" in payload:
        sleep_forever()
    if b"EAT-MEMORY" in payload:
        eat_memory(8 << 30)
    return page_outcome(settings, payload, charset)


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


def announced_hanging_page(settings, payload, charset):
    """hanging_page that first writes the child's pid to the file ``CURATE_TEST_HANG_FILE`` names."""
    if b"HANG-ME" in payload:
        with open(os.environ["CURATE_TEST_HANG_FILE"] + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace(os.environ["CURATE_TEST_HANG_FILE"] + ".tmp", os.environ["CURATE_TEST_HANG_FILE"])
    return hanging_page(settings, payload, charset)


def memory_error_page(settings, payload, charset):
    """The real page extraction, with the extractor itself running out of memory on marked pages
    (as resiliparse or lxml do under the bound: a MemoryError from inside the library)."""
    from curate.stages.extract import page as warc  # where the page extraction lives

    if b"EAT-MEMORY" in payload:
        def exhausted(*args, **kwargs):
            raise MemoryError

        original = warc.extract_resiliparse
        warc.extract_resiliparse = exhausted
        try:
            return warc.page_outcome(settings, payload, charset)
        finally:
            warc.extract_resiliparse = original
    return warc.page_outcome(settings, payload, charset)


def address_space():
    """This process's address space in bytes (what RLIMIT_AS bounds), from /proc."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize")


def size_of(data):
    return len(data)
