"""What an erase request names: the request file (ids, URLs or domains) and host names in IDNA form."""

from __future__ import annotations

import hashlib
import os
import re
import urllib.parse
from dataclasses import dataclass

from curate.stages.errors import SettingsError

BY = ("ids", "urls", "domains")


_DOMAIN = re.compile(r"^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$")


@dataclass(frozen=True)
class Request:
    path: str
    by: str  # ids | urls | domains
    entries: tuple[str, ...]
    sha256: str  # of the file's bytes: what the manifests record

    @property
    def key(self) -> str:
        """The journal key of this request's work in a unit."""
        return f"erase-{self.sha256[:16]}"


def read_request(path: str, by: str) -> Request:
    """The entries of a request file; SettingsError naming the file (and line) when it is unreadable,
    empty, not UTF-8 or (``domains``) holds something that is not a domain name."""
    if by not in BY:
        raise SettingsError(f"erase: by must be one of {', '.join(BY)}; got {by!r}")
    flag = f"--{by}"
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise SettingsError(f"{flag} {path}: cannot read ({e.strerror})") from None
    entries = []
    for n, raw in enumerate(data.split(b"\n"), 1):
        try:
            line = raw.decode("utf-8").removesuffix("\r")
        except UnicodeDecodeError as e:
            raise SettingsError(f"{flag} {path} line {n}: not UTF-8 (byte {e.start + 1} of the line)") from None
        if not line.strip():
            continue
        if by == "domains":
            line = ascii_host(line.strip().rstrip(".")) or ""
            if not _DOMAIN.match(line):
                raise SettingsError(f"{flag} {path} line {n}: {raw.decode('utf-8').strip()!r} is not a domain name "
                                    "(give hosts such as example.com or bücher.de, without scheme, port or path)")
        # ids and URLs are taken exactly as written (an id may begin with a space): erasing a document
        # other than the one asked for is the failure that matters
        entries.append(line)
    if not entries:
        raise SettingsError(f"{flag} {path}: empty: no {by} to erase")
    return Request(os.path.abspath(path), by, tuple(dict.fromkeys(entries)), hashlib.sha256(data).hexdigest())


def ascii_host(host: str) -> str | None:
    """``host`` lower-cased in its ASCII (IDNA, UTS #46) form, so ``bücher.de`` and
    ``xn--bcher-kva.de`` are one name on both sides of a match; None when it has no such form."""
    host = host.lower()
    if host.isascii():
        return host
    import idna

    try:
        return idna.encode(host, uts46=True).decode("ascii")
    except (idna.IDNAError, UnicodeError):
        try:
            return host.encode("idna").decode("ascii")
        except UnicodeError:
            return None


def is_ip(host: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def host_of(url: str | None) -> str | None:
    """The ASCII host of ``url`` (:func:`ascii_host`), without a trailing dot; None without one."""
    if not url:
        return None
    try:
        host = urllib.parse.urlsplit(url).hostname
    except ValueError:
        return None
    return ascii_host(host.rstrip(".")) if host else None


def domain_of(host: str | None, domains) -> str | None:
    """The listed domain ``host`` is or lies below (``a.example.com`` is below ``example.com``); an IP
    address matches only itself (the domain ``0.1`` is not a suffix of ``10.0.0.1``)."""
    if not host:
        return None
    if is_ip(host):
        return host if host in domains else None
    labels = host.split(".")
    return next((d for d in (".".join(labels[k:]) for k in range(len(labels))) if d in domains), None)
