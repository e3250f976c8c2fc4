"""``clean``: repair and normalise text before it is filtered, deduplicated and tokenized.

In order, on each document:

1. ftfy (``fix_text``): mojibake, HTML entities, terminal escapes, ligatures, curly quotes, line
   breaks, with ftfy's own options exposed. ``fix_character_width`` is off by default: it turns
   full-width CJK punctuation into ASCII. ftfy works per string and fixes text line by line, so
   only lines that could change are given to it: lines with an HTML entity, a control character
   or a non-ASCII character other than curly quotes, dashes, ellipsis and bullet (which cannot be
   mojibake; their quotes are uncurled here). Most lines of a typical corpus skip ftfy.
2. Unicode normalisation (``normalization``, NFC by default).
3. Control characters removed (C0 and C1 except tab and newline, and the byte-order mark);
   ``\\r\\n`` and ``\\r`` become ``\\n`` (first of all, so ftfy sees the lines as they are).
4. Optional line-level boilerplate removal (``remove_boilerplate_lines``): whole lines matching
   ``boilerplate_patterns`` (by default C4's: "javascript", cookie and policy notices).
5. Whitespace: trailing spaces and tabs on every line removed, runs of blank lines squeezed to
   ``max_blank_lines``, blank lines at the start and whitespace at the end removed. Indentation
   and runs of spaces inside lines are kept (code blocks need them).

Documents that end up empty are dropped with the reason ``empty_after_clean``. Steps 2-5 are
Arrow kernels over the whole column.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from modules.dataset import STRING, mark_dropped
from modules.errors import SettingsError
from modules.stage import MapStage, check_choice, check_range

C4_BOILERPLATE = ("javascript", "terms of use", "privacy policy", "cookie policy", "uses cookies",
                  "use of cookies", "use cookies")
#: characters ftfy leaves alone (apart from uncurling quotes, done here, vectorised): they are
#: windows-1252 bytes 0x80-0x9f, UTF-8 continuation bytes, so text made of them and ASCII can never
#: be mis-decoded UTF-8. Most non-ASCII characters of English text are in this set.
SAFE = "\u2018\u2019\u201c\u201d\u2013\u2014\u2026\u2022"
#: lines ftfy could change: a character outside printable ASCII, tab and SAFE, or an HTML entity
NEEDS_FTFY = "[^\\t\\x20-\\x7e" + "".join(f"\\x{{{ord(c):04x}}}" for c in SAFE) + "]"
CONTROL = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\x{feff}]"


@dataclass(frozen=True)
class CleanSettings:
    fix_text: bool = field(default=True, metadata={"help": "run ftfy.fix_text (the options below)"})
    fix_encoding: bool = field(default=True, metadata={"help": "ftfy: undo mojibake"})
    unescape_html: str = field(default="auto", metadata={
        "help": "ftfy: decode HTML entities (auto: up to the first line with a '<')", "choices": ("auto", "yes", "no")})
    remove_terminal_escapes: bool = field(default=True, metadata={"help": "ftfy: remove ANSI escape sequences"})
    fix_latin_ligatures: bool = field(default=True, metadata={"help": "ftfy: ﬁ -> fi"})
    fix_character_width: bool = field(default=False, metadata={
        "help": "ftfy: full-width to ASCII (breaks CJK punctuation)"})
    uncurl_quotes: bool = field(default=True, metadata={"help": "ftfy: curly quotes to straight quotes"})
    fix_line_breaks: bool = field(default=True, metadata={"help": "ftfy: \\u2028, \\x85 ... to \\n"})
    normalization: str = field(default="NFC", metadata={
        "help": "Unicode normalisation", "choices": ("NFC", "NFKC", "NFD", "NFKD", "none")})
    remove_control_chars: bool = field(default=True, metadata={"help": "remove control characters"})
    normalize_whitespace: bool = field(default=True, metadata={
        "help": "strip trailing spaces, squeeze blank lines, trim the document"})
    max_blank_lines: int = field(default=1, metadata={"help": "longest run of blank lines kept", "metavar": "N"})
    remove_boilerplate_lines: bool = field(default=False, metadata={
        "help": "remove whole lines matching --boilerplate-patterns"})
    boilerplate_patterns: tuple[str, ...] = field(default=C4_BOILERPLATE, metadata={
        "help": "case-insensitive RE2 patterns for boilerplate lines", "metavar": "PATTERN,..."})

    def __post_init__(self):
        check_choice(self, "unescape_html")
        check_choice(self, "normalization")
        check_range(self, "max_blank_lines", 0)
        if self.remove_boilerplate_lines:
            if not self.boilerplate_patterns:
                raise SettingsError("boilerplate_patterns must not be empty when remove_boilerplate_lines is on")
            import pyarrow as pa
            import pyarrow.compute as pc

            for p in self.boilerplate_patterns:
                try:
                    pc.match_substring_regex(pa.array([""]), p)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    raise SettingsError(f"boilerplate_patterns: {p!r} is not a valid RE2 pattern: {e}") from None

    def ftfy_config(self):
        import ftfy

        return ftfy.TextFixerConfig(
            unescape_html={"auto": "auto", "yes": True, "no": False}[self.unescape_html],
            remove_terminal_escapes=self.remove_terminal_escapes, fix_encoding=self.fix_encoding,
            fix_latin_ligatures=self.fix_latin_ligatures, fix_character_width=self.fix_character_width,
            uncurl_quotes=self.uncurl_quotes, fix_line_breaks=self.fix_line_breaks,
            remove_control_chars=False, normalization=None,  # done below, vectorised
        )


def fix_lines(arr, settings: CleanSettings):
    """ftfy on the lines that could change; the others are not touched.

    ftfy's ``unescape_html="auto"`` decodes entities until the first line containing ``<`` and
    not after it, in each document; the same rule decides which lines get it here."""
    import ftfy
    import pyarrow as pa
    import pyarrow.compute as pc

    lists = pc.split_pattern(arr, "\n")
    lines = lists.values
    mask = pc.match_substring_regex(lines, NEEDS_FTFY).to_numpy(zero_copy_only=False)
    if settings.unescape_html == "no":
        unescape = np.zeros(len(lines), dtype=bool)
    else:
        unescape = np.ones(len(lines), dtype=bool)
        if settings.unescape_html == "auto":
            lt = pc.match_substring(lines, "<").to_numpy(zero_copy_only=False)
            seen = np.concatenate([[0], np.cumsum(lt)])
            offsets = lists.offsets.to_numpy()
            parent = np.repeat(np.arange(len(lists)), np.diff(offsets))
            unescape = (seen[1:] - seen[offsets[parent]]) == 0
        mask |= unescape & pc.match_substring(lines, "&").to_numpy(zero_copy_only=False)
    if not mask.any():
        return arr
    todo = np.flatnonzero(mask)
    with_html = settings.ftfy_config()._replace(unescape_html=True)
    without = with_html._replace(unescape_html=False)
    values = lines.take(pa.array(todo)).to_pylist()
    fixed = [ftfy.fix_text(v, with_html if u else without) for v, u in zip(values, unescape[todo])]
    lines = pc.replace_with_mask(lines, pa.array(mask), pa.array(fixed, type=lines.type))
    return pc.binary_join(type(lists).from_arrays(lists.offsets, lines), pa.scalar("\n", lines.type))


def clean_text(text: pd.Series, settings: CleanSettings) -> pd.Series:
    import pyarrow.compute as pc

    from modules.filters.base import to_arrow

    arr = to_arrow(text)
    arr = pc.replace_substring(pc.replace_substring(arr, "\r\n", "\n"), "\r", "\n")
    if settings.fix_text and len(arr):
        arr = fix_lines(arr, settings)
        if settings.uncurl_quotes:  # what ftfy.fixes.uncurl_quotes does, for the lines it skipped
            arr = pc.replace_substring_regex(arr, "[\\x{201c}-\\x{201f}]", '"')
            arr = pc.replace_substring_regex(arr, "[\\x{02bc}\\x{2018}-\\x{201b}]", "'")
    if settings.normalization != "none":
        arr = pc.utf8_normalize(arr, settings.normalization)
    if settings.remove_control_chars:
        arr = pc.replace_substring_regex(arr, CONTROL, "")
    if settings.remove_boilerplate_lines:
        words = "|".join(f"(?:{p})" for p in settings.boilerplate_patterns)
        arr = pc.replace_substring_regex(arr, rf"(?im)^[^\n]*(?:{words})[^\n]*(?:\n|\z)", "")
    if settings.normalize_whitespace:
        arr = pc.replace_substring_regex(arr, r"(?m)[ \t\p{Zs}]+$", "")
        keep = settings.max_blank_lines + 1
        arr = pc.replace_substring_regex(arr, "\n{" + str(keep + 1) + ",}", "\n" * keep)
        arr = pc.utf8_rtrim_whitespace(pc.replace_substring_regex(arr, r"^\s*\n", ""))
    return pd.Series(pd.arrays.ArrowStringArray(arr), index=text.index, dtype=STRING)


def clean(df: pd.DataFrame, settings: CleanSettings) -> pd.DataFrame:
    text = clean_text(df["text"], settings)
    out = df.assign(text=text)
    return mark_dropped(out, np.asarray(text.str.len().fillna(0) == 0), "empty_after_clean")


class CleanStage(MapStage):
    name = "clean"
    Settings = CleanSettings
    help = "ftfy, Unicode NFC, control characters, whitespace and optional boilerplate lines"

    def transform(self, df, settings):
        return clean(df, settings)
