"""``redact``: remove personal data and secrets from text, before tokenization.

==================  ==============================  ============================================
kind                replaced by                     what
==================  ==============================  ============================================
``secret``          ``API_KEY_REDACTED``            private-key blocks; well-known key formats
                                                    (AWS, GitHub, Slack, Google, Stripe, OpenAI,
                                                    JWT); quoted values assigned to key/token/
                                                    secret/password names; high-entropy tokens
``email``           ``<redacted-email>``            addresses with a letters-only top-level
                                                    domain (``rand@0.8.5`` is a crate version)
``network_address`` ``<redacted-network-address>``  IPv4 and IPv6 addresses, see below
``home_path``       ``<redacted-path>``             ``/home/USER``, ``/Users/USER`` where a path
                                                    starts (not inside a URL: ``https://x.org/home/
                                                    about`` stays), and ``C:\\Users\\USER``; the
                                                    separator after the user name is kept
==================  ==============================  ============================================

A high-entropy token is a run of 20+ characters of ``[A-Za-z0-9_+-]`` with upper case, lower case
and digits, Shannon entropy >= ``secret_min_entropy`` bits per character, and less than 40% of it in
word-like runs (3+ lower-case or 4+ upper-case letters), which is what tells ``aB3dE5fG7h...`` from
``getUserAccountSettings2``.

The IPv4 rule, since dotted numbers in software text are often not addresses:

- a dotted quad is an address only when it is not part of a longer dotted number (``1.2.3.4.5``),
  not glued to a word (``v1.2.3.4``), not preceded by a version or numbering word (``version``,
  ``release``, ``build``, ``rev``, ``section``, ``chapter``, ``step``, ...) or a version operator
  (``@ == >= <= ~= ^ ~``), and not followed by a pre-release or build suffix (``1.2.3.4-beta``);
- every other valid address is redacted, private and loopback ones included. With
  ``keep_non_public_ips`` the addresses that identify no one are kept: loopback, private,
  link-local, multicast, reserved, unspecified and documentation ranges (``127.0.0.1``,
  ``192.168.1.10``, ``0.0.0.0``, ``2001:db8::1``, ``::1``), as bigcode's PII pipeline does.

So ``version 1.2.3.4`` and ``v1.2.3.4`` stay and ``ping 1.2.3.4`` becomes
``ping <redacted-network-address>``.

Presidio (``presidio=PHONE_NUMBER,CREDIT_CARD,...`` or ``presidio=default``; the optional ``pii``
extra): phone numbers (``phonenumbers``), credit-card numbers (Luhn), US SSNs, IBANs (checksum) and
the other pattern recognisers of ``presidio-analyzer``, run offline on a blank spaCy pipeline
(``modules/presidio.py``); names of people and places with a spaCy model the user gives
(``spacy_model``). Findings are replaced by ``<redacted-phone>``, ... (``strategy=redact``), by one
fixed token (``replace``) or by a salted hash of the value (``hash``: equal values stay equal), and
counted per entity. Presidio runs after the fast path, on what it left: the regex kinds above stay on
the fast path (about 30x faster) unless they are switched off.

Fixed patterns run as Arrow regex kernels over the column. IP addresses and high-entropy tokens
need a decision per match, so they go through Python's ``re`` with a callback, but only for the
documents a vectorised screen found a candidate in. Counts per kind go into the manifest under
``redacted`` (occurrences, and ``documents`` with at least one).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import os
import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from curate.stages.dataset import STRING
from curate.stages.errors import SettingsError
from curate.stages.stage import MapStage, check_range

KINDS = ("secret", "email", "network_address", "home_path")
COUNT_PREFIX = "_pii_"
EMAIL_TOKEN, IP_TOKEN, SECRET_TOKEN, PATH_TOKEN = (
    "<redacted-email>", "<redacted-network-address>", "API_KEY_REDACTED", "<redacted-path>")

# RE2 patterns (Arrow kernels) -----------------------------------------------------------------

EMAIL = r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}\b"
PRIVATE_KEY = r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?s:.*?)-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----"
KEY_FORMATS = "|".join([
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",                     # AWS access key id
    r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b",                 # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b",
    r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",                  # Slack
    r"\bAIza[0-9A-Za-z_\-]{35}",                          # Google API key
    r"\b[sr]k_(?:live|test)_[0-9A-Za-z]{16,}",            # Stripe
    r"\bsk-(?:proj-)?[A-Za-z0-9_\-]{32,}",                # OpenAI-style
    r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",  # JWT
    r"(?i:aws_secret_access_key)\s*[=:]\s*[A-Za-z0-9/+]{40}\b",
])
#: a quoted value assigned to a key-like name: the value only is replaced
ASSIGNED = (r"((?i:api[_\-]?key|secret[_\-]?key|client[_\-]?secret|access[_\-]?token|auth[_\-]?token|"
            r"password|passwd|secret|token)[\"']?\s*[:=]\s*[\"'])[^\"'\s]{8,}([\"'])")
#: a home directory where a path starts (start of text, after a space, quote, bracket, ``=``, ``:``,
#: ``,``, ``;``, ``|`` or ``file://``), not ``/home/`` inside a URL or a longer path
#: (``https://example.com/home/about``). RE2 has no lookbehind: the boundary is captured and put
#: back, and so is the terminator (``/`` or nothing), so ``/home/alice`` becomes ``<redacted-path>``.
HOME_POSIX = (r"(^|[\s\"'`=(\[{<>:,;|]|file://)(?:/home|/Users)/[A-Za-z0-9_][A-Za-z0-9._\-]*(/|\b)")
#: the separator after the user name is captured and kept as it was (``\\`` or an escaped ``\\\\``)
HOME_WINDOWS = r"\b[A-Za-z]:(?:\\\\|\\)(?:Users|Documents and Settings)(?:\\\\|\\)[A-Za-z0-9_][A-Za-z0-9._\-]*(\\\\|\\|\b)"
SCREEN_IPV4 = r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}"
SCREEN_IPV6 = r"[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{0,4}:|::[0-9A-Fa-f]{1,4}\b"
SCREEN_TOKEN = r"[A-Za-z0-9_+\-]{20,}"

# Python patterns (per-match decisions) --------------------------------------------------------

_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
IPV4 = re.compile(rf"(?<![\w.])({_OCTET}(?:\.{_OCTET}){{3}})(?!\.\d)(?!\w)")
IPV6 = re.compile(r"(?<![\w:.])((?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|\d{1,3}(?:\.\d{1,3}){3})?)(?![\w:])")
VERSION_BEFORE = re.compile(
    r"(?i)(?:\b(?:v|ver|version|versions|release|build|rev|revision|update|patch|section|chapter|"
    r"figure|fig|table|step|rule|clause|paragraph|item)\.?|==|>=|<=|~=|!=|[@^~§])\s*:?\s*$")
VERSION_AFTER = re.compile(r"^[-+][0-9A-Za-z]")
TOKEN = re.compile(r"(?<![A-Za-z0-9_+\-])[A-Za-z0-9_+\-]{20,}={0,2}(?![A-Za-z0-9_+\-=])")
WORDY = re.compile(r"[a-z]{3,}|[A-Z]{4,}")


@dataclass(frozen=True)
class RedactSettings:
    emails: bool = field(default=True, metadata={"help": "redact e-mail addresses"})
    network_addresses: bool = field(default=True, metadata={"help": "redact IPv4/IPv6 addresses"})
    secrets: bool = field(default=True, metadata={"help": "redact keys, tokens, passwords, high-entropy strings"})
    home_paths: bool = field(default=True, metadata={"help": "redact user names in home-directory paths"})
    keep_non_public_ips: bool = field(default=False, metadata={
        "help": "keep loopback, private, link-local and documentation addresses (they identify no one)"})
    secret_min_length: int = field(default=20, metadata={"help": "shortest high-entropy token redacted",
                                                         "metavar": "N"})
    secret_min_entropy: float = field(default=3.5, metadata={"help": "bits per character of a high-entropy token",
                                                             "metavar": "BITS"})
    presidio: tuple[str, ...] = field(default=(), metadata={
        "help": "Presidio entities to redact too (needs the pii extra): 'default' (PHONE_NUMBER, CREDIT_CARD, "
                "US_SSN, IBAN_CODE, CRYPTO, UK_NHS, US_ITIN) or a list; PERSON, LOCATION, ... need --spacy-model",
        "metavar": "ENTITY,..."})
    spacy_model: str | None = field(default=None, metadata={
        "help": "directory of a spaCy model with named entities, for PERSON/LOCATION/NRP (default: a blank "
                "pipeline, pattern recognisers only; nothing is downloaded)", "metavar": "DIR"})
    language: str = field(default="en", metadata={"help": "language of the Presidio recognisers", "metavar": "LANG"})
    presidio_threshold: float = field(default=0.4, metadata={
        "help": "lowest Presidio score redacted (phone numbers score 0.4, checksum-validated findings 1.0)",
        "metavar": "SCORE"})
    strategy: str = field(default="redact", metadata={
        "help": "Presidio findings: <redacted-phone>..., a fixed token, or a salted hash of the value",
        "choices": ("redact", "replace", "hash")})
    replace_token: str = field(default="<redacted>", metadata={"help": "the token of --strategy replace",
                                                               "metavar": "TEXT"})
    hash_salt_env: str | None = field(default=None, metadata={
        "help": "environment variable holding the salt of --strategy hash (kept out of manifests)",
        "metavar": "VAR"})

    def __post_init__(self):
        check_range(self, "secret_min_length", 8)
        check_range(self, "secret_min_entropy", 0, 8)
        check_range(self, "presidio_threshold", 0, 1)
        from curate.stages.stage import check_choice

        check_choice(self, "strategy")
        if not self.presidio:
            return
        from curate.stages import presidio

        if not presidio.available():
            raise SettingsError("presidio: presidio-analyzer and spacy are not installed; "
                                "pip install 'curate[pii]' (or leave --presidio out)")
        if self.spacy_model and not os.path.isdir(self.spacy_model):
            raise SettingsError(f"spacy_model: no such directory {self.spacy_model!r}")
        entities = tuple(dict.fromkeys(
            e for item in self.presidio for e in (presidio.DEFAULT_ENTITIES if item == "default" else (item,))))
        try:
            known = set(presidio.entity_names(self.language)) if not self.spacy_model else None
        except ValueError as e:
            raise SettingsError(f"language: {e}") from None
        if known is not None:
            unknown = [e for e in entities if e not in known]
            if unknown:
                raise SettingsError(f"presidio: unknown entity {unknown[0]!r} without a spaCy model "
                                    f"(pattern recognisers: {', '.join(sorted(known))})")
        object.__setattr__(self, "presidio", entities)


def entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def is_secret_token(tok: str, settings: RedactSettings) -> bool:
    core = tok.rstrip("=")
    if len(core) < settings.secret_min_length:
        return False
    if not (any(c.isupper() for c in core) and any(c.islower() for c in core) and any(c.isdigit() for c in core)):
        return False
    if sum(len(m) for m in WORDY.findall(core)) >= 0.4 * len(core):
        return False
    return entropy(core) >= settings.secret_min_entropy


def _public(ip: str, settings: RedactSettings) -> bool | None:
    """True to redact this address; None when it does not parse."""
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return None
    return addr.is_global or not settings.keep_non_public_ips


def redact_document(text: str, settings: RedactSettings, ips: bool, tokens: bool) -> tuple[str, int, int]:
    """The per-match rules for one document: (text, network addresses, high-entropy tokens)."""
    n_ip = n_tok = 0

    def ipv4(m):
        nonlocal n_ip
        start, end = m.span(1)
        if VERSION_BEFORE.search(text[max(0, start - 24):start]) or VERSION_AFTER.match(text[end:end + 2]):
            return m.group(0)
        if not _public(m.group(1), settings):
            return m.group(0)
        n_ip += 1
        return IP_TOKEN

    def ipv6(m):
        nonlocal n_ip
        ip = m.group(1)
        if ip.count(":") < 2 or not any(c.isdigit() for c in ip) or not _public(ip, settings):
            return m.group(0)
        n_ip += 1
        return IP_TOKEN

    def token(m):
        nonlocal n_tok
        if not is_secret_token(m.group(0), settings):
            return m.group(0)
        n_tok += 1
        return SECRET_TOKEN

    if tokens:
        text = TOKEN.sub(token, text)
    if ips:
        text = IPV6.sub(ipv6, IPV4.sub(ipv4, text))
    return text, n_ip, n_tok


def redact(df: pd.DataFrame, settings: RedactSettings) -> pd.DataFrame:
    """Redacted text plus one ``_pii_<kind>`` count column per kind (the stage sums and drops them)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from curate.stages.filters.base import to_arrow

    arr = to_arrow(df["text"])
    n = len(arr)
    counts = {k: np.zeros(n, dtype=np.int64) for k in KINDS}

    def sub(arr, kind, pattern, replacement):
        counts[kind] += pc.count_substring_regex(arr, pattern).to_numpy()
        return pc.replace_substring_regex(arr, pattern, replacement)

    if settings.secrets:  # assignments before key formats: a key is counted once
        arr = sub(arr, "secret", PRIVATE_KEY, SECRET_TOKEN)
        arr = sub(arr, "secret", ASSIGNED, r"\1" + SECRET_TOKEN + r"\2")
        arr = sub(arr, "secret", KEY_FORMATS, SECRET_TOKEN)
    if settings.emails:
        arr = sub(arr, "email", EMAIL, EMAIL_TOKEN)
    ips = np.zeros(n, dtype=bool)
    if settings.network_addresses:
        ips = (pc.match_substring_regex(arr, SCREEN_IPV4).to_numpy(zero_copy_only=False)
               | pc.match_substring_regex(arr, SCREEN_IPV6).to_numpy(zero_copy_only=False))
    tokens = np.zeros(n, dtype=bool)
    if settings.secrets:
        tokens = pc.match_substring_regex(arr, SCREEN_TOKEN).to_numpy(zero_copy_only=False)
    todo = np.flatnonzero(ips | tokens)
    if len(todo):
        values = arr.take(pa.array(todo)).to_pylist()
        fixed = []
        for i, text in zip(todo, values):  # only documents with a candidate
            text, n_ip, n_tok = redact_document(text, settings, bool(ips[i]), bool(tokens[i]))
            counts["network_address"][i] += n_ip
            counts["secret"][i] += n_tok
            fixed.append(text)
        mask = np.zeros(n, dtype=bool)
        mask[todo] = True
        arr = pc.replace_with_mask(arr, pa.array(mask), pa.array(fixed, type=arr.type))
    if settings.home_paths:
        arr = sub(arr, "home_path", HOME_POSIX, r"\1" + PATH_TOKEN + r"\2")
        arr = sub(arr, "home_path", HOME_WINDOWS, PATH_TOKEN + r"\1")
    for kind in count_kinds(settings)[len(KINDS):]:
        counts[kind] = np.zeros(n, dtype=np.int64)
    if settings.presidio and n:
        arr = _presidio(arr, settings, counts)
    text = pd.Series(pd.arrays.ArrowStringArray(arr), index=df.index, dtype=STRING)
    return df.assign(text=text, **{COUNT_PREFIX + k: pd.Series(v, index=df.index) for k, v in counts.items()})


def count_kinds(settings: RedactSettings) -> tuple[str, ...]:
    """The kinds counted: the regex kinds, then one per Presidio entity (lower case)."""
    return (*KINDS, *(e.lower() for e in settings.presidio if e.lower() not in KINDS))


def _presidio(arr, settings: RedactSettings, counts: dict):
    import pyarrow as pa

    from curate.stages import presidio

    texts, found = presidio.redact_texts(
        arr.to_pylist(), settings.presidio, settings.language, settings.spacy_model,
        settings.presidio_threshold, settings.strategy, settings.replace_token, settings.hash_salt_env)
    for i, c in enumerate(found):
        for e, k in c.items():
            counts[e.lower()][i] += k
    return pa.array(texts, type=arr.type)


def sum_counts(df: pd.DataFrame) -> dict:
    kinds = [c[len(COUNT_PREFIX):] for c in df.columns if c.startswith(COUNT_PREFIX)]
    cols = [COUNT_PREFIX + k for k in kinds]
    sums = {k: int(df[COUNT_PREFIX + k].fillna(0).sum()) for k in kinds}
    sums["documents"] = int((df[cols].fillna(0).sum(axis=1) > 0).sum())
    return sums


def merge_counts(parts: list[dict]) -> dict:
    out = dict.fromkeys((*KINDS, "documents"), 0)
    for p in parts:
        for k, v in p.items():
            out[k] = out.get(k, 0) + v
    return out


class RedactStage(MapStage):
    name = "redact"
    Settings = RedactSettings
    help = "replace e-mail addresses, IP addresses, secrets and home-directory user names"

    def transform(self, df, settings):
        return redact(df, settings)

    def run(self, settings, ctx) -> dict:
        """Write the redacted text without the count columns; their sums go into the manifest.

        The counts and the written partitions come from the same delayed partitions, computed in
        the one ``run_compute`` call the writer makes, so every document is redacted once."""
        import dask
        import dask.dataframe as dd

        from curate.stages import dataset

        out = self.apply(dataset.read_dataset(ctx.input, ctx.io, rejects_dir=ctx.output), settings)
        cols = [c for c in out._meta.columns if c.startswith(COUNT_PREFIX)]
        parts = out.to_delayed()
        total = dask.delayed(merge_counts)([dask.delayed(sum_counts)(p) for p in parts])
        clean = dd.from_delayed([dask.delayed(pd.DataFrame.drop)(p, columns=cols) for p in parts],
                                meta=out._meta.drop(columns=cols), verify_meta=False)
        redacted: dict = {}

        def compute(*collections):
            *results, counts = ctx.run_compute(*collections, total)
            redacted.update(counts)
            return tuple(results)

        return dataset.write_dataset(clean, dataclasses.replace(ctx, compute=compute), stage=self.name,
                                     settings=settings, reject_columns=self.reject_columns,
                                     extra={"redacted": redacted})
