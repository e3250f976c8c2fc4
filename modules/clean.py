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
4. Optional line-level edits, on lines whose breaks are now final and before anything below changes
   what a line ends with or how many words it has (C4 read extracted text as it came):
   ``c4_lines``, C4's line edit (TensorFlow Datasets' ``c4_utils.clean_page``, datatrove's
   ``C4QualityFilter``): each line stripped and without citations, kept only if it is a C4 line (ends
   with . ? ! " ' but not ..., 3+ words counted after the citations go, no word over 1000 characters)
   mentioning neither "javascript" nor a policy phrase; the lines split where Python's ``splitlines``
   splits. C4 drops the whole page for a C4 line with "lorem ipsum", or with ``{`` and no javascript:
   those lines stay, so that ``c4_lorem_ipsum`` and ``c4_curly_bracket`` after clean still drop the
   page. Then ``remove_boilerplate_lines``: whole lines matching ``boilerplate_patterns`` (by default
   C4's: "javascript", cookie and policy notices).
5. Optional modifiers, each an option, in this order (NeMo Curator's document modifiers):
   ``remove_urls`` (``https?://\\S+|www\\.\\S+``, any case, as NeMo's ``UrlRemover``);
   ``remove_markdown`` (headings' ``#``, ``**bold**``, ``__bold__``, ``*italic*``, ``_italic_``,
   inline code, ``[text](url)`` and images to their text; NeMo's ``MarkdownRemover`` keeps a link's URL
   instead of its text and takes ``_`` inside ``snake_case`` names for emphasis, this does neither);
   slicing (``slice_from``/``slice_to`` markers, NeMo's ``Slicer``: from the first ``slice_from`` to the
   last ``slice_to``, the markers kept unless ``slice_exclude_markers``, a document without a marker
   becomes empty; then ``max_chars``); ``remove_quotation`` (NeMo's ``QuotationRemover``: a document
   wrapped in ``"`` loses them unless its first line ends with one); ``normalize_newlines`` (NeMo's
   ``NewlineNormalizer``: three or more newlines become two).
6. Whitespace: trailing spaces and tabs on every line removed, runs of blank lines squeezed to
   ``max_blank_lines``, blank lines at the start and whitespace at the end removed. Indentation
   and runs of spaces inside lines are kept (code blocks need them).

Documents that end up empty are dropped with the reason ``empty_after_clean``. Steps 2-5 are
Arrow kernels over the whole column. For C4's text exactly, ``c4_lines`` with ``fix_text``,
``normalization`` and ``remove_control_chars`` off: C4 did none of them (whitespace normalisation
leaves C4's lines as they are).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from curate.stages.dataset import STRING, mark_dropped
from curate.stages.errors import SettingsError
from curate.stages.filters.c4_fineweb import C4_POLICY_SUBSTRINGS, c4_line_rules
from curate.stages.stage import MapStage, check_choice, check_range

#: C4's line rules: a line mentioning javascript or one of C4's policy phrases (the list the C4 filters use)
C4_BOILERPLATE = ("javascript", *C4_POLICY_SUBSTRINGS)
#: characters ftfy leaves alone (apart from uncurling quotes, done here, vectorised): they are
#: windows-1252 bytes 0x80-0x9f, UTF-8 continuation bytes, so text made of them and ASCII can never
#: be mis-decoded UTF-8. Most non-ASCII characters of English text are in this set.
SAFE = "\u2018\u2019\u201c\u201d\u2013\u2014\u2026\u2022"
#: lines ftfy could change: a character outside printable ASCII, tab and SAFE, or an HTML entity
NEEDS_FTFY = "[^\\t\\x20-\\x7e" + "".join(f"\\x{{{ord(c):04x}}}" for c in SAFE) + "]"
CONTROL = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\x{feff}]"
#: where Python's str.splitlines (so C4) splits a line, other than \n and \r (already \n here)
LINE_BREAKS = r"[\x0b\x0c\x1c-\x1e\x{85}\x{2028}\x{2029}]"


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
    c4_lines: bool = field(default=False, metadata={
        "help": "keep only the lines C4 keeps: ending in . ? ! \" ' (not ...), at least 3 words, no word over "
                "1000 characters, no 'javascript', no policy phrase; citations like [1], [edit], [citation "
                "needed] removed"})
    remove_boilerplate_lines: bool = field(default=False, metadata={
        "help": "remove whole lines matching --boilerplate-patterns"})
    boilerplate_patterns: tuple[str, ...] = field(default=C4_BOILERPLATE, metadata={
        "help": "case-insensitive RE2 patterns for boilerplate lines", "metavar": "PATTERN,..."})
    remove_urls: bool = field(default=False, metadata={"help": "remove http(s):// and www. URLs (NeMo's UrlRemover)"})
    remove_markdown: bool = field(default=False, metadata={
        "help": "Markdown to plain text: headings, bold, italic, inline code, links and images keep their text"})
    slice_from: str | None = field(default=None, metadata={
        "help": "keep text from the first occurrence of this marker (no marker: the document becomes empty)",
        "metavar": "TEXT"})
    slice_to: str | None = field(default=None, metadata={
        "help": "keep text up to the last occurrence of this marker (no marker: the document becomes empty)",
        "metavar": "TEXT"})
    slice_exclude_markers: bool = field(default=False, metadata={"help": "slicing: leave the markers out"})
    max_chars: int | None = field(default=None, metadata={"help": "keep at most N characters", "metavar": "N"})
    remove_quotation: bool = field(default=False, metadata={
        "help": "drop the quotation marks around a quoted document (NeMo's QuotationRemover)"})
    normalize_newlines: bool = field(default=False, metadata={
        "help": "three or more newlines become two (NeMo's NewlineNormalizer)"})

    def __post_init__(self):
        check_choice(self, "unescape_html")
        check_choice(self, "normalization")
        check_range(self, "max_blank_lines", 0)
        check_range(self, "max_chars", 1)
        for name in ("slice_from", "slice_to"):
            if getattr(self, name) == "":
                raise SettingsError(f"{name} must not be empty (leave it out to not slice)")
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

    from curate.stages.filters.base import to_arrow

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
    if settings.c4_lines and len(arr):
        arr = keep_c4_lines(arr)
    if settings.remove_boilerplate_lines:
        words = "|".join(f"(?:{p})" for p in settings.boilerplate_patterns)
        arr = pc.replace_substring_regex(arr, rf"(?im)^[^\n]*(?:{words})[^\n]*(?:\n|\z)", "")
    arr = apply_modifiers(arr, settings)
    if settings.normalize_whitespace:
        arr = pc.replace_substring_regex(arr, r"(?m)[ \t\p{Zs}]+$", "")
        keep = settings.max_blank_lines + 1
        arr = pc.replace_substring_regex(arr, "\n{" + str(keep + 1) + ",}", "\n" * keep)
        arr = pc.utf8_rtrim_whitespace(pc.replace_substring_regex(arr, r"^\s*\n", ""))
    return pd.Series(pd.arrays.ArrowStringArray(arr), index=text.index, dtype=STRING)


def keep_c4_lines(arr):
    """C4's line edit (the rule in the module docstring, step 4), over the whole column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    lists = pc.split_pattern(pc.replace_substring_regex(arr, LINE_BREAKS, "\n"), "\n")
    doc = pc.list_parent_indices(lists).to_numpy()
    c4 = c4_line_rules(pc.utf8_trim_whitespace(pc.list_flatten(lists)))
    # the lorem ipsum and { lines are the page rules' business: kept for the c4_* filters to see
    keep = c4["lorem"] | c4["curly"] | (c4["candidate"] & ~c4["javascript"] & ~c4["policy"])
    offsets = np.concatenate([[0], np.cumsum(np.bincount(doc[keep], minlength=len(arr)))])
    kept = pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), c4["text"].filter(pa.array(keep)))
    # as C4: the lines joined, then the page stripped (a citation at its start leaves a space)
    return pc.utf8_trim_whitespace(pc.binary_join(kept, pa.scalar("\n", pa.large_string())))


URL = r"(?i)https?://\S+|www\.\S+"
#: (RE2 pattern, replacement) applied in order; emphasis needs a non-word character (or an end)
#: on the outside, so ``snake_case_name`` and ``2*3*4`` stay
MARKDOWN = (
    (r"(?m)^[ \t]{0,3}#{1,6}[ \t]+", ""),                               # ATX heading marks
    (r"!?\[([^\]\n]*)\]\([^)\n]*\)", r"\1"),                           # [text](url), ![alt](src)
    (r"`([^`\n]+)`", r"\1"),                                            # inline code
    (r"(?m)(^|[^\w*])\*\*([^*\n]+?)\*\*($|[^\w*])", r"\1\2\3"),             # **bold**
    (r"(?m)(^|[^\w_])__([^_\n]+?)__($|[^\w_])", r"\1\2\3"),                 # __bold__
    (r"(?m)(^|[^\w*])\*([^*\s](?:[^*\n]*?[^*\s])?)\*($|[^\w*])", r"\1\2\3"),  # *italic*
    (r"(?m)(^|[^\w_])_([^_\s](?:[^_\n]*?[^_\s])?)_($|[^\w_])", r"\1\2\3"),     # _italic_
)


def slice_text(text: str, settings: CleanSettings) -> str:
    """NeMo's Slicer with string markers (and strip), then ``max_chars``."""
    if settings.slice_from is not None or settings.slice_to is not None:
        start, end = 0, len(text)
        if settings.slice_from is not None:
            start = text.find(settings.slice_from)
            if start < 0:
                return ""
            if settings.slice_exclude_markers:
                start += len(settings.slice_from)
        if settings.slice_to is not None:
            end = text.rfind(settings.slice_to)
            if end < 0:
                return ""
            if not settings.slice_exclude_markers:
                end += len(settings.slice_to)
        text = text[start:end].strip()
    if settings.max_chars is not None:
        text = text[:settings.max_chars]
    return text


def unquote(text: str) -> str:
    """NeMo's QuotationRemover, rule for rule."""
    if len(text.strip()) > 2 and text[0] == '"' and text[-1] == '"':
        if "\n" not in text.strip() or text.split("\n")[0][-1] != '"':
            text = text[1:-1]
    return text


def apply_modifiers(arr, settings: CleanSettings):
    import pyarrow as pa
    import pyarrow.compute as pc

    if settings.remove_urls:
        arr = pc.replace_substring_regex(arr, URL, "")
    if settings.remove_markdown:
        for pattern, repl in MARKDOWN:
            # twice: a match's outer character cannot start the next match ("*a* *b*")
            arr = pc.replace_substring_regex(pc.replace_substring_regex(arr, pattern, repl), pattern, repl)
    if settings.slice_from is not None or settings.slice_to is not None or settings.max_chars is not None:
        arr = pa.array([slice_text(t, settings) for t in arr.to_pylist()], type=arr.type)
    if settings.remove_quotation:
        quoted = pc.and_(pc.starts_with(arr, '"'), pc.ends_with(arr, '"')).to_numpy(zero_copy_only=False)
        if quoted.any():
            todo = np.flatnonzero(quoted)
            fixed = [unquote(t) for t in arr.take(pa.array(todo)).to_pylist()]
            arr = pc.replace_with_mask(arr, pa.array(quoted), pa.array(fixed, type=arr.type))
    if settings.normalize_newlines:
        arr = pc.replace_substring_regex(arr, r"\n{3,}", "\n\n")
    return arr


def clean(df: pd.DataFrame, settings: CleanSettings) -> pd.DataFrame:
    text = clean_text(df["text"], settings)
    out = df.assign(text=text)
    return mark_dropped(out, np.asarray(text.str.len().fillna(0) == 0), "empty_after_clean")


class CleanStage(MapStage):
    name = "clean"
    Settings = CleanSettings
    help = "ftfy, Unicode NFC, control characters, whitespace; optional C4 and boilerplate lines"

    def transform(self, df, settings):
        return clean(df, settings)
