"""extract_arxiv: an arXiv-like bulk tarball, single-paper archives, and hostile archives."""

import gzip

import pandas as pd
import pytest

from curate.stages.errors import DataError
from curate.stages.extract import RawFile
from curate.stages.extract.archive import safe_member_name
from curate.stages.extract.arxiv import COLUMNS, ExtractArxivSettings, extract_arxiv_file, paper_id
from curate.stages.extract.latex import InputBomb, find_main, inline_inputs, strip_comments
from tests.conftest import read_output, run_stage
from tests.rawdata import SINGLE_TEX, arxiv_bulk_tar, paper_tarball, tar_bytes


def _frame(path, on_error="skip", **settings):
    return extract_arxiv_file(RawFile(str(path), path.name), ExtractArxivSettings(**settings), on_error)


def _reasons(df):
    return dict(zip(df["id"], df["_reason"].fillna("kept")))


def test_bulk_tarball_to_papers(tmp_path):
    df = _frame(arxiv_bulk_tar(tmp_path / "arXiv_src_2301_001.tar"))
    assert _reasons(df) == {"2301.00001": "kept", "2301.00002": "kept", "2301.00003": "no_source"}
    kept = df[df["_reason"].isna()]
    assert kept["url"].tolist() == ["https://arxiv.org/abs/2301.00001", "https://arxiv.org/abs/2301.00002"]
    assert (kept["source"] == "arXiv_src_2301_001.tar").all()
    text = kept["text"].iloc[0]
    # inputs inlined (a file in a subfolder, an \include without extension), in order
    assert text.index("\\section{Introduction}") < text.index("Intro text with math") < text.index(
        "\\section{Results}") < text.index("The results are good.")
    assert "5\\% lower" in text  # an escaped percent is not a comment
    assert "\\begin{abstract}\nWe study things.\n\\end{abstract}" in text
    for gone in ("usepackage", "newcommand", "a comment that goes", "hidden remark", "bibitem", "\\bibliography",
                 "\\maketitle", "after end{document}", "\\documentclass"):
        assert gone not in text, gone
    assert kept["text"].iloc[1] == "\\section{Only}\nA single-file paper."


def test_hostile_members_are_rejected_and_the_rest_kept(tmp_path):
    bomb = gzip.compress(b"\\section{x}" + b" " * (8 << 20))  # 8 MiB of spaces in 8 kB
    inner_escape = gzip.compress(tar_bytes([("../../evil.tex", b"\\section{evil}"), ("a.tex", SINGLE_TEX.encode())]))
    path = arxiv_bulk_tar(tmp_path / "arXiv_src_2301_002.tar", extra=[
        ("../../etc/x", b"owned"),
        ("/abs/path.gz", gzip.compress(SINGLE_TEX.encode())),
        ("2301/2301.00009.gz", None, "/etc/passwd"),  # a symlink
        ("2301/2301.00004.gz", bomb),
        ("2301/2301.00005.gz", inner_escape),
        ("2301/2301.00006.gz", b"not gzip at all"),
    ])
    df = _frame(path, max_inflated_bytes="1MiB")
    reasons = _reasons(df)
    assert reasons["arXiv_src_2301_002.tar:../../etc/x"] == "unsafe_path"
    assert reasons["arXiv_src_2301_002.tar:/abs/path.gz"] == "unsafe_path"
    assert reasons["arXiv_src_2301_002.tar:2301/2301.00009.gz"] == "link_member"
    assert reasons["2301.00004"] == "decompression_bomb"
    assert reasons["2301.00005:../../evil.tex"] == "unsafe_path"
    assert reasons["2301.00005"] == "kept"  # its safe file is still read
    assert reasons["2301.00006"] == "corrupt_member"
    assert [k for k, v in reasons.items() if v == "kept"] == ["2301.00001", "2301.00002", "2301.00005"]
    assert not (tmp_path.parent / "etc").exists() and not (tmp_path / "evil.tex").exists()  # nothing is written
    assert df.loc[df["id"] == "2301.00004", "_detail"].str.contains("1048576").all()


def test_truncated_archive_keeps_the_papers_before_the_break(tmp_path):
    full = arxiv_bulk_tar(tmp_path / "full.tar").read_bytes()
    second = full.index(b"2301/2301.00002.gz")  # the header of the second paper
    (tmp_path / "cut.tar").write_bytes(full[: second + 700])
    df = _frame(tmp_path / "cut.tar")
    assert df["id"].iloc[0] == "2301.00001" and pd.isna(df["_reason"].iloc[0])
    assert df["_reason"].iloc[-1] == "truncated_archive"


def test_single_paper_archives(tmp_path):
    (tmp_path / "2302.01234.tar.gz").write_bytes(paper_tarball())
    (tmp_path / "hep-th9901001.gz").write_bytes(gzip.compress(SINGLE_TEX.encode()))
    (tmp_path / "2302.05555.gz").write_bytes(gzip.compress(b"%!PS-Adobe-2.0 a PostScript submission"))
    assert _reasons(_frame(tmp_path / "2302.01234.tar.gz")) == {"2302.01234": "kept"}
    df = _frame(tmp_path / "hep-th9901001.gz")
    assert df[["id", "url"]].values.tolist() == [["hep-th/9901001", "https://arxiv.org/abs/hep-th/9901001"]]
    assert _reasons(_frame(tmp_path / "2302.05555.gz")) == {"2302.05555": "no_tex"}


def test_stage_two_archives_dask_equals_pandas(tmp_path):
    a = arxiv_bulk_tar(tmp_path / "in" / "arXiv_src_2301_001.tar")
    b = tmp_path / "in" / "2302.01234.tar.gz"
    b.write_bytes(paper_tarball())
    manifest = run_stage("extract_arxiv", {}, [tmp_path / "in"], tmp_path / "out")
    out = read_output(tmp_path / "out")
    assert manifest["partitions"] == 2
    assert manifest["counts"] == {"in": 4, "out": 3, "dropped": {"no_source": 1}}
    assert list(out.columns) == list(COLUMNS)
    expected = pd.concat([_frame(b), _frame(a)], ignore_index=True)  # sorted by path: 2302... < arXiv...
    expected = expected[expected["_reason"].isna()].drop(columns=["_reason", "_detail"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(out, expected, check_dtype=False)


def test_not_an_archive_fails_naming_it_unless_skip(tmp_path):
    (tmp_path / "x.tar").write_bytes(b"plain text, not a tar")
    with pytest.raises(DataError, match="x.tar"):
        _frame(tmp_path / "x.tar", on_error="raise")
    assert _reasons(_frame(tmp_path / "x.tar")) == {"x.tar": "not_an_archive"}


def test_latex_helpers():
    assert strip_comments("a % c\n% whole line\nb \\% kept\nc \\\\% gone\n") == "a \nb \\% kept\nc \\\\\n"
    files = {"intro.tex": "\\input{main}", "main.tex": "\\documentclass{x}\\begin{document}\\input{intro}\\end{document}",
             "other.tex": "\\begin{document}short\\end{document}"}
    assert find_main(files) == "main.tex"
    assert "\\input" not in inline_inputs("main.tex", files)  # a cycle ends instead of recursing forever
    assert paper_id("2301/2301.00001.gz") == "2301.00001" and paper_id("math.AG0501001.gz") == "math.AG/0501001"
    assert safe_member_name("a/../b.tex") == "b.tex"
    assert safe_member_name("a/../../b.tex") is None and safe_member_name("C:/x") is None


def _input_bomb(levels: int) -> list[tuple[str, bytes]]:
    """Each file inputs the next twice: 2**levels copies of the last one once inlined."""
    files = [(f"f{i}.tex", f"\\input{{f{i + 1}}}\\input{{f{i + 1}}}".encode()) for i in range(levels)]
    files.append((f"f{levels}.tex", b"x" * 100))
    return [("main.tex", b"\\documentclass{article}\\begin{document}\\input{f0}\\end{document}"), *files]


def test_an_input_bomb_is_rejected_and_the_other_papers_kept(tmp_path):
    path = arxiv_bulk_tar(tmp_path / "arXiv_src_2301_003.tar", extra=[
        ("2301/2301.00007.gz", gzip.compress(tar_bytes(_input_bomb(21)))),  # 200 MiB once inlined
        ("2301/2301.00008.gz", gzip.compress(tar_bytes(_input_bomb(6)))),  # 6.4 kB: under 1MiB
    ])
    df = _frame(path, max_inflated_bytes="1MiB")
    reasons = _reasons(df)
    assert reasons["2301.00007"] == "decompression_bomb" and reasons["2301.00008"] == "kept"
    assert [k for k, v in reasons.items() if v == "kept"] == ["2301.00001", "2301.00002", "2301.00008"]
    assert df.loc[df["id"] == "2301.00007", "_detail"].str.contains("member 2301/2301.00007.gz: more than").all()
    assert len(df.loc[df["id"] == "2301.00008", "text"].iloc[0]) == 64 * 100
    # the same paper under a lower bound: the bound is max_inflated_bytes
    low = _frame(path, max_inflated_bytes="4KiB")
    assert low.loc[low["id"] == "2301.00008", "_detail"].str.endswith("exceed 4096 characters").all()


def test_inlining_stops_at_its_bounds():
    files = {n: d.decode() for n, d in _input_bomb(3)}
    assert inline_inputs("main.tex", files).count("x") == 800
    assert inline_inputs("main.tex", files, max_chars=10_000).count("x") == 800
    with pytest.raises(InputBomb, match="exceed 500 characters"):
        inline_inputs("main.tex", files, max_chars=500)
    with pytest.raises(InputBomb, match="more than 10 "):
        inline_inputs("main.tex", files, max_includes=10)  # 15 files inlined, even were they empty


def test_a_single_paper_archive_without_tex_is_rejected_not_lost(tmp_path):
    (tmp_path / "2301.00001.tar.gz").write_bytes(tar_bytes([("paper.pdf", b"%PDF-1.4 x"), ("fig.png", b"\x89PNG")],
                                                           compress=True))
    (tmp_path / "2301.00002.tar").write_bytes(tar_bytes([("fig.png", b"\x89PNG"), ("plot.eps.gz", b"x")]))
    assert _reasons(_frame(tmp_path / "2301.00001.tar.gz")) == {"2301.00001": "no_source"}
    assert _reasons(_frame(tmp_path / "2301.00002.tar")) == {"2301.00002": "no_tex"}


def test_a_bulk_member_not_named_by_an_arxiv_id_is_rejected(tmp_path):
    path = arxiv_bulk_tar(tmp_path / "arXiv_src_2301_004.tar", extra=[
        ("2301/weird_name.gz", gzip.compress(SINGLE_TEX.encode()))])
    reasons = _reasons(_frame(path))
    assert reasons["arXiv_src_2301_004.tar:2301/weird_name.gz"] == "not_a_paper"
    assert [k for k, v in reasons.items() if v == "kept"] == ["2301.00001", "2301.00002"]


@pytest.mark.parametrize("kind", ["pax", "gnu-longname", "pax-claims-8GB"])
def test_oversized_pax_and_long_name_headers_are_refused_before_reading(tmp_path, kind):
    import io
    import tarfile

    buf = io.BytesIO()
    first = gzip.compress(SINGLE_TEX.encode(), mtime=0)
    fmt = tarfile.GNU_FORMAT if kind == "gnu-longname" else tarfile.PAX_FORMAT
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        info = tarfile.TarInfo("2301/2301.00001.gz")
        info.size = len(first)
        tar.addfile(info, io.BytesIO(first))
        if kind == "gnu-longname":
            info = tarfile.TarInfo("2301/" + "n" * (2 << 20) + ".gz")  # a 2 MiB name
        else:
            info = tarfile.TarInfo("2301/2301.00002.gz")
            info.pax_headers = {"comment": "c" * (2 << 20)}  # a 2 MiB pax record
        info.size = len(first)
        tar.addfile(info, io.BytesIO(first))
    data = buf.getvalue()
    if kind == "pax-claims-8GB":  # the header claims 10 GB and the file ends: nothing may try to read it
        at = data.index(b"././@PaxHeader")
        block = bytearray(data[at:at + 512])
        block[124:136] = b"77777777777\0"  # the largest 11-digit octal size
        block[148:156] = b" " * 8
        block[148:155] = b"%06o\0" % sum(block)
        data = data[:at] + bytes(block)
    (tmp_path / "hdr.tar").write_bytes(data)
    df = _frame(tmp_path / "hdr.tar")
    assert df.loc[df["_reason"].isna(), "id"].tolist() == ["2301.00001"]
    bad = df[df["_reason"].notna()]
    assert bad["_reason"].tolist() == ["oversized_header"]
    assert "1048576" in bad["_detail"].iloc[0]
