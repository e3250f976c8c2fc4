"""``extract_arxiv``: arXiv source tarballs to papers.

Inputs are arXiv's bulk source tarballs (``arXiv_src_2301_001.tar``: one member per paper,
``2301/2301.00001.gz``, each either a gzip'd single ``.tex`` file or a gzip'd tarball of the
paper's files) or single-paper archives (``2301.00001.tar.gz``, ``2301.00001.gz``). Each paper's
TeX becomes text with :mod:`curate.stages.extract.latex` (main file found, inputs inlined, comments,
preamble and bibliography removed).

Archives are read as untrusted (:mod:`curate.stages.extract.archive`): streamed, nothing written to disk,
no link followed, every size bounded. Rows: ``id`` (the arXiv id, e.g. ``2301.00001`` or
``hep-th/9901001``), ``text``, ``url`` (the abstract page, for arXiv ids), ``source`` (the input
file's name).

Rejected (``_reason``): ``unsafe_path`` (a member path escaping its folder, such as
``../../etc/x``), ``link_member``, ``special_member``, ``too_large``, ``decompression_bomb``,
``truncated_archive`` (the papers before the break are kept), ``oversized_header`` (a pax or
GNU long-name header over 1 MiB: not read, and the archive stops there), ``corrupt_member``,
``no_source`` (a PDF-only submission), ``no_tex`` (no LaTeX document among the files, or a
single-paper archive without any .tex), ``no_text``, ``not_a_paper`` (a bulk tarball's .gz/.pdf member
not named by an arXiv id). ``decompression_bomb`` also covers a paper whose ``\\input`` files
inline to more than ``max_inflated_bytes`` characters.
"""

from __future__ import annotations

import gzip
import io
import posixpath
import re
import zlib
from dataclasses import dataclass, field

import pandas as pd

from curate.stages.dataset import STRING
from curate.stages.extract import RawFile, file_failure, frame, from_files, raw_inputs
from curate.stages.extract.archive import ArchiveBomb, Limits, gunzip_bounded, iter_tar
from curate.stages.extract.latex import InputBomb, decode_tex, is_tex_name, looks_like_tex, paper_text
from curate.stages.extract.sandbox import (
    PageCrashed,
    PageTimeout,
    PageTooLarge,
    check_limits,
    memory_field,
    sandbox_for,
    timeout_field,
)
from curate.stages.stage import Stage, parse_bytes

ARXIV_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".gz")
COLUMNS = ("id", "text", "url", "source")
_NEW_ID = re.compile(r"^\d{4}\.\d{4,5}(?:v\d+)?$")
_OLD_ID = re.compile(r"^([a-z\-]+(?:\.[A-Z]{2})?)(\d{7})(?:v\d+)?$")


@dataclass(frozen=True)
class ExtractArxivSettings:
    max_member_bytes: str = field(default="256MiB", metadata={
        "help": "largest archive member read (a paper's gzip, a .tex file)", "metavar": "SIZE"})
    max_inflated_bytes: str = field(default="256MiB", metadata={
        "help": "largest inflated paper; beyond it the paper is rejected as a decompression bomb",
        "metavar": "SIZE"})
    extract_timeout: float = timeout_field("paper")
    extract_memory: str = memory_field("paper")

    def __post_init__(self):
        parse_bytes(self.max_member_bytes, "max_member_bytes")
        parse_bytes(self.max_inflated_bytes, "max_inflated_bytes")
        check_limits(self)

    def limits(self) -> Limits:
        return Limits(max_member_bytes=parse_bytes(self.max_member_bytes, "max_member_bytes"),
                      max_inflated_bytes=parse_bytes(self.max_inflated_bytes, "max_inflated_bytes"))


#: what the sandbox's child runs per paper
PAPER_TEXT = "curate.stages.extract.latex:paper_text"


def arxiv_meta() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=STRING) for c in (*COLUMNS, "_reason", "_detail")})


def paper_id(name: str) -> str:
    """arXiv id from a member or file name: ``2301/2301.00001.gz`` -> ``2301.00001``,
    ``hep-th9901001.gz`` -> ``hep-th/9901001``; other names give their stem."""
    stem = posixpath.basename(name.replace("\\", "/"))
    for suffix in (".tar.gz", ".tgz", ".tar", ".gz"):
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    m = _OLD_ID.match(stem)
    if m:
        return f"{m.group(1)}/{m.group(2)}"
    return stem


def abs_url(pid: str) -> str | None:
    if _NEW_ID.match(pid) or _OLD_ID.match(pid.replace("/", "")):
        return f"https://arxiv.org/abs/{pid}"
    return None


class _Paper:
    """Collects the rows of one input file."""

    def __init__(self, raw: RawFile, limits: Limits, sandbox=None):
        self.raw = raw
        self.limits = limits
        self.sandbox = sandbox  # extract_timeout 0: None, the TeX is cleaned in this process
        self.rows: list[dict] = []

    def reject(self, rid: str, reason: str, detail: str) -> None:
        self.rows.append({"id": rid, "text": "", "url": None, "source": self.raw.name,
                          "_reason": reason, "_detail": f"{self.raw.path}: {detail}"})

    def emit(self, pid: str, sources: dict[str, bytes], where: str) -> None:
        if not sources:
            self.reject(pid, "no_tex", f"{where}: no .tex file")
            return
        try:
            if self.sandbox is None:
                text = paper_text(sources, self.limits.max_inflated_bytes)
            else:
                text = self.sandbox.call(PAPER_TEXT, sources, self.limits.max_inflated_bytes)
        except InputBomb as e:
            self.reject(pid, "decompression_bomb", f"{where}: {e}")
            return
        except PageTimeout as e:
            self.reject(pid, "timeout", f"{where}: {e}")
            return
        except PageTooLarge as e:
            self.reject(pid, "too_large", f"{where}: {e} (--extract-memory)")
            return
        except PageCrashed as e:
            self.reject(pid, "extract_error", f"{where}: {e}")
            return
        if text is None:
            self.reject(pid, "no_tex", f"{where}: no LaTeX document among {', '.join(sorted(sources))}")
        elif not text:
            self.reject(pid, "no_text", f"{where}: empty document body")
        else:
            self.rows.append({"id": pid, "text": text, "url": abs_url(pid), "source": self.raw.name})

    def from_gz(self, member: str, data: bytes) -> None:
        """A gzip'd paper: a single .tex file or a tarball of the paper's files."""
        pid = paper_id(member)
        where = f"member {member}"
        try:
            head = zlib.decompressobj(wbits=31).decompress(data, 512)
        except zlib.error as e:
            self.reject(pid, "corrupt_member", f"{where}: not gzip data: {e}")
            return
        if _is_tar_header(head):
            self.from_tar(pid, gzip.GzipFile(fileobj=io.BytesIO(data)), where, mode="r|")
            return
        if head.startswith(b"%PDF"):
            self.reject(pid, "no_source", f"{where}: a PDF, not TeX source")
            return
        try:
            tex = gunzip_bounded(data, self.limits.max_inflated_bytes)
        except ArchiveBomb as e:
            self.reject(pid, "decompression_bomb", f"{where}: {e}")
            return
        except (EOFError, zlib.error) as e:
            self.reject(pid, "truncated_archive", f"{where}: {e}")
            return
        if not looks_like_tex(decode_tex(tex)):
            self.reject(pid, "no_tex", f"{where}: not a LaTeX file")
            return
        self.emit(pid, {"main.tex": tex}, where)

    def from_tar(self, pid: str, fileobj, where: str, mode: str) -> None:
        """A tarball of one paper's files (inner members are bounded together by max_inflated_bytes)."""
        sources: dict[str, bytes] = {}
        for m in iter_tar(fileobj, self.limits, mode=mode, max_total=self.limits.max_inflated_bytes,
                          want=is_tex_name):
            if m.reason:
                self.reject(f"{pid}:{m.name}" if m.name else pid, m.reason, f"{where}: {m.detail}")
                if m.reason in ("decompression_bomb", "truncated_archive", "oversized_header"):
                    return
                continue
            sources[m.name] = m.data
        self.emit(pid, sources, where)


def _is_tar_header(head: bytes) -> bool:
    return len(head) >= 262 and head[257:262] == b"ustar"


def extract_arxiv_file(raw: RawFile, settings: ExtractArxivSettings, on_error: str = "raise") -> pd.DataFrame:
    """Every paper of one arXiv source archive as a row (pure apart from reading the file)."""
    meta = arxiv_meta()
    limits = settings.limits()
    try:
        f = open(raw.path, "rb")
    except OSError as e:
        return file_failure(raw, on_error, "unreadable_file", e, meta)
    with f:
        head = f.read(1024)
        f.seek(0)
        gzipped = head.startswith(b"\x1f\x8b")
        if gzipped:
            try:
                inner_head = zlib.decompressobj(wbits=31).decompress(head, 512)
            except zlib.error as e:
                return file_failure(raw, on_error, "unreadable_file", f"corrupt gzip: {e}", meta)
        else:
            inner_head = head
        sandbox = sandbox_for(settings) if settings.extract_timeout else None
        paper = _Paper(raw, limits, sandbox)
        try:
            _read_papers(paper, f, raw, limits, gzipped, inner_head)
        except _NotAnArchive:
            return file_failure(raw, on_error, "not_an_archive", "neither a tar archive nor gzip data", meta)
    return frame(paper.rows, meta)


class _NotAnArchive(Exception):
    pass


def _read_papers(paper: _Paper, f, raw: RawFile, limits: Limits, gzipped: bool, inner_head: bytes) -> None:
    if _is_tar_header(inner_head):
        _from_archive(paper, f)
    elif gzipped:
        data = f.read(limits.max_member_bytes + 1)
        if len(data) > limits.max_member_bytes:
            paper.reject(paper_id(raw.name), "too_large", f"file larger than {limits.max_member_bytes} bytes")
        else:
            paper.from_gz(raw.name, data)
    else:
        raise _NotAnArchive


def _is_paper(name: str) -> bool:
    """A bulk tarball's member named by an arXiv id (a figure.pdf or plot.eps.gz of a paper is not)."""
    return abs_url(paper_id(name)) is not None


def _from_archive(paper: _Paper, f) -> None:
    """A tar: either arXiv's bulk layout (one .gz or .pdf per paper) or the files of a single paper."""
    loose: dict[str, bytes] = {}
    #: .gz and .pdf members not named by an arXiv id, passed over unread: a single paper's figures,
    #: or (in a bulk tarball) papers we cannot name, which must not vanish without a reject
    unnamed: list[str] = []
    bulk = stopped = False

    def want(name: str) -> bool:
        lower = name.lower()
        if is_tex_name(lower):
            return True
        if lower.endswith((".gz", ".pdf")):
            if _is_paper(posixpath.splitext(name)[0]):
                return True
            unnamed.append(name)
        return False

    for m in iter_tar(f, paper.limits, mode="r|*", want=want):
        if m.reason:
            paper.reject(f"{paper.raw.name}:{m.name}" if m.name else paper.raw.name, m.reason,
                         f"member {m.name or '?'}: {m.detail}")
            if m.reason in ("truncated_archive", "too_many_members", "oversized_header"):
                stopped = True
                break
            continue
        lower = m.name.lower()
        if lower.endswith(".gz"):
            bulk = True
            paper.from_gz(m.name, m.data)
        elif lower.endswith(".pdf"):
            bulk = True
            paper.reject(paper_id(m.name[:-4]), "no_source", f"member {m.name}: PDF only, no TeX source")
        else:
            loose[m.name] = m.data
    if bulk:
        for name in unnamed:
            paper.reject(f"{paper.raw.name}:{name}", "not_a_paper",
                         f"member {name}: not named by an arXiv id in a bulk tarball; not read")
    if loose:
        paper.emit(paper_id(paper.raw.name), loose, "archive")
    elif not bulk and not stopped:
        # a single paper without TeX: say so rather than yield nothing
        pdfs = [n for n in unnamed if n.lower().endswith(".pdf")]
        if pdfs:
            paper.reject(paper_id(paper.raw.name), "no_source", f"archive: PDF only ({', '.join(pdfs)}), no TeX source")
        else:
            paper.reject(paper_id(paper.raw.name), "no_tex", "archive: no .tex file")


class ExtractArxivStage(Stage):
    """arXiv source tarballs to papers (LaTeX body without comments, preamble and bibliography)."""

    name = "extract_arxiv"
    needs = ()
    makes = COLUMNS
    Settings = ExtractArxivSettings
    cli = ("extract", "arxiv")
    help = "arXiv source tarballs to documents (safe archive reading, LaTeX cleaned)"
    reads_raw_files = True
    reads = ("files",)  # never an earlier stage's documents: first in a job, or an input of its own

    def check_output(self, settings, inputs, output) -> None:
        # here, not in check: a job runs this for every stage, also one whose input a download makes
        from curate.stages.extract.sandbox import probe_limits

        probe_limits(settings, PAPER_TEXT)  # an --extract-memory the child cannot start in, refused now

    def run(self, settings, ctx):
        from curate.stages.dataset import write_dataset

        files = raw_inputs(ctx.input, ARXIV_SUFFIXES, "arXiv source")
        ddf = from_files(extract_arxiv_file, files, arxiv_meta(), "extract-arxiv",
                         settings=settings, on_error=ctx.io.on_error)
        return write_dataset(ddf, ctx, stage=self.name, settings=settings)
