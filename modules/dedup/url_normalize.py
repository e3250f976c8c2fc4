"""The URL as ``url_dedup`` compares it: RFC 3986 section 6 normalisation that never merges two pages.

:func:`canonical` turns a URL (stripped, not empty) into its key; two URLs are one page when their keys
are equal. A URL with a scheme followed by ``//`` (``http://...``, ``ftp://...``) is split into its
components (RFC 3986 appendix B) and normalised:

- the scheme is lower-cased; ``https`` counts as ``http`` unless ``keep_scheme``;
- percent-encoding (userinfo, host, path, query, fragment): an escape of an unreserved character
  (``A-Z a-z 0-9 - . _ ~``) is decoded (``%7E`` is ``~``, ``%41`` is ``A``), every other escape is kept
  with upper-case hex (``%e9`` is ``%E9``); nothing else is decoded or encoded, so ``%20``, ``+``,
  ``%2F``, ``/``, a raw ``é`` and ``%C3%A9`` all stay different;
- the host: percent-escapes are decoded when the octets are UTF-8, then IDNA 2008 with UTS 46 mapping
  (``idna``): ``Bücher.de``, ``xn--bcher-kva.de`` and ``%62%C3%BCcher.de`` are one host, ``straße.de``
  and ``strasse.de`` are two. A host IDNA refuses (``my_host.example``, an escape that is not UTF-8)
  is kept as written, its ASCII letters lower-cased. One trailing ``.`` goes (``example.com.``), so does
  a leading ``www.`` unless ``keep_www``. An IPv6 literal keeps its brackets and is written compressed
  (``[0:0::1]`` is ``[::1]``);
- the port: an empty port and the scheme's default (80 for http, 443 for https) go; leading zeros go;
- the userinfo (``user@``) stays (normalised as above);
- the path: dot-segments are removed (RFC 3986 5.2.4: ``/a/./b/../c`` is ``/a/c``), then one trailing
  ``/`` (so an empty path is ``/``, and ``/a/`` is ``/a``, but ``/a//`` is ``/a/``); case is kept;
- the query is split on ``&`` only; a parameter whose name (percent-decoded for the comparison only)
  matches a ``drop_params`` pattern is left out, unless it holds a ``;`` (servers that split on ``;``
  would read other parameters in it); the others stay in their order, as written (``flag`` and
  ``flag=`` differ), rejoined with ``&``. A query left empty by dropping goes with its ``?``; a ``?``
  that was empty as written stays (RFC 3986 6.2.3: ``/a?`` is not ``/a``);
- the fragment goes, unless ``keep_fragment`` (then an empty ``#`` stays, as ``?`` does).

Every other URL is its own key, as written: one without a scheme (relative, ``a/b``, ``//host/a``), one
whose scheme is not followed by ``//`` (``mailto:``, ``news:``, ``urn:``, ``data:``, ``javascript:``...),
one whose authority is malformed (a port that is not digits, a bracketed host that is not an IPv6
address: ``[::1``, ``[v1.x]``, a zone id). Their keys start with :data:`AS_WRITTEN`, which no normalised
key does (those start with the scheme), so they only ever equal themselves.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
import string
from functools import lru_cache
from urllib.parse import unquote, unquote_to_bytes

import idna

#: the first character of the key of a URL compared as written; a normalised key starts with a letter
AS_WRITTEN = "="
DEFAULT_PORTS = {"http": 80, "https": 443}
UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")

_HIERARCHICAL = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*)://")
_PARTS = re.compile(r"([^/?#]*)([^?#]*)(?:\?([^#]*))?(?:#(.*))?", re.DOTALL)
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_KEPT_ESCAPE = re.compile(r"(%[0-9A-F]{2})")
_DIGITS = re.compile(r"[0-9]*")
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


class Malformed(ValueError):
    """An authority normalisation cannot read: the URL is compared as written."""


def canonical(url: str, *, keep_scheme: bool = False, keep_www: bool = False, keep_fragment: bool = False,
              drop_params: tuple[str, ...] = ()) -> str:
    """The key of ``url`` (already stripped, not empty): see the module's docstring."""
    head = _HIERARCHICAL.match(url)
    if head is None:
        return AS_WRITTEN + url
    scheme = head.group(1).lower()
    authority, path, query, fragment = _PARTS.fullmatch(url, head.end()).groups()
    try:
        netloc = _authority(authority, scheme, keep_www)
    except Malformed:
        return AS_WRITTEN + url
    if scheme == "https" and not keep_scheme:
        scheme = "http"
    key = f"{scheme}://{netloc}{_path(path)}"
    query = _query(query, drop_params)
    if query is not None:
        key += "?" + query
    if keep_fragment and fragment is not None:
        key += "#" + escapes(fragment)
    return key


def escapes(text: str) -> str:
    """``text`` with escapes of unreserved characters decoded, the others in upper-case hex."""
    return _ESCAPE.sub(_escape, text) if "%" in text else text


def _escape(match: re.Match) -> str:
    char = chr(int(match.group(1), 16))
    return char if char in UNRESERVED else "%" + match.group(1).upper()


def _authority(authority: str, scheme: str, keep_www: bool) -> str:
    # the last @: the host never holds one, a userinfo with a raw @ is kept whole all the same
    userinfo, at, hostport = authority.rpartition("@")
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0:
            raise Malformed(hostport)
        host = ipv6(hostport[1:end])
        port = hostport[end + 1:]
        if port and not port.startswith(":"):
            raise Malformed(hostport)
        port = port[1:]
    else:
        name, _, port = hostport.partition(":")
        host = hostname(name)
        host = host[:-1] if host.endswith(".") else host  # example.com. is the fully qualified example.com
        if not keep_www and host.startswith("www.") and len(host) > 4:
            host = host[4:]
    if not _DIGITS.fullmatch(port):
        raise Malformed(hostport)
    if port and int(port) != DEFAULT_PORTS.get(scheme):
        host += f":{int(port)}"
    return (escapes(userinfo) + "@" if at else "") + host


def ipv6(text: str) -> str:
    """``[compressed address]``; a zone id or IPvFuture is :class:`Malformed` (rare: not worth a rule)."""
    if "%" in text:
        raise Malformed(text)
    try:
        return f"[{ipaddress.IPv6Address(text).compressed}]"
    except ValueError:
        raise Malformed(text) from None


@lru_cache(maxsize=1 << 16)  # a crawl has far fewer hosts than URLs, and IDNA is pure Python
def hostname(host: str) -> str:
    """The host as IDNA 2008 + UTS 46 writes it, or as written (ASCII lower-cased) if IDNA refuses it."""
    if "%" not in host and host.isascii() and "xn--" not in host.lower():
        return host.lower()  # what IDNA would make of it, refused or not, without its cost
    name = host
    if "%" in host:
        try:
            name = unquote_to_bytes(host).decode("utf-8")
        except UnicodeDecodeError:
            return _as_written(host)
    try:
        return idna.encode(name, uts46=True).decode("ascii")
    except (UnicodeError, ValueError):  # idna.IDNAError is a UnicodeError
        return _as_written(host)


def _as_written(host: str) -> str:
    # hosts are case-insensitive (RFC 3986 3.2.2) but only ASCII case is certain without IDNA
    pieces = _KEPT_ESCAPE.split(escapes(host))
    return "".join(p if i % 2 else p.translate(_ASCII_LOWER) for i, p in enumerate(pieces))


def _path(path: str) -> str:
    path = remove_dot_segments(escapes(path))
    return path[:-1] if path.endswith("/") else path


def remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4 for a path that is empty or starts with ``/`` (a URL with an authority)."""
    if "." not in path:
        return path
    segments = path.split("/")[1:]
    out: list[str] = []
    for segment in segments:
        if segment == "..":
            if out:
                out.pop()
        elif segment != ".":
            out.append(segment)
    if segments[-1] in (".", ".."):  # /a/b/.. is the folder /a/, not the file /a
        out.append("")
    return "/" + "/".join(out)


def _query(query: str | None, drop_params: tuple[str, ...]) -> str | None:
    if query is None:
        return None
    pieces = query.split("&")
    if drop_params:
        tracking = _matcher(tuple(drop_params))
        pieces = [p for p in pieces if not is_tracking(p, tracking)]
        if not pieces:
            return None
    return "&".join(escapes(p) for p in pieces)


def is_tracking(piece: str, tracking) -> bool:
    """Whether the raw parameter ``piece`` is one to leave out (``tracking``: :func:`_matcher`'s)."""
    if ";" in piece:  # utm_source=nl;id=5 is id=5 to a server that splits on ;
        return False
    return tracking(unquote(piece.partition("=")[0], errors="surrogateescape")) is not None


@lru_cache(maxsize=16)
def _matcher(patterns: tuple[str, ...]):
    # fnmatchcase's rule (case-sensitive), all patterns in one regex
    return re.compile("|".join(fnmatch.translate(p) for p in patterns)).match
