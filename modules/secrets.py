"""Credentials never leave curate: :func:`redact_url` for every URL (and every text holding URLs)
that curate writes or prints: logs, manifests, ``_rejects/`` ``_detail``, raw-file sidecars,
performance reports.

What is redacted:

- the password of a URL's user information: ``https://user:pw@host/`` -> ``https://user:***@host/``
  (a user part without a password may be a token, ``https://TOKEN@host/``: it becomes ``***@``);
- the values of query parameters that sign or authorise a request: pre-signed S3
  (``X-Amz-Signature``, ``X-Amz-Credential``, ``X-Amz-Security-Token``, ``Signature``,
  ``AWSAccessKeyId``), Google Cloud Storage (``X-Goog-Signature``, ``X-Goog-Credential``), Azure
  SAS (``sig``), and the usual ``token``, ``access_token``, ``api_key``, ``key``, ``password``,
  ``secret`` (names compared case-insensitively);
- anything shaped like an AWS access key id (``AKIA...``/``ASIA...``) and the value after
  ``aws_secret_access_key``/``aws_session_token``, wherever they appear.

The redacted form of a URL is stable (the same whatever the signature), so it can also name a
download in a sidecar: a re-signed URL of the same object still finds its partial file.

Pure string functions, no state; importable from every module (stdlib only).
"""

from __future__ import annotations

import re

MASK = "***"

#: query parameters whose value is a secret (lower case)
SECRET_PARAMS = frozenset({
    "x-amz-signature", "x-amz-credential", "x-amz-security-token", "signature", "awsaccesskeyid",
    "x-goog-signature", "x-goog-credential", "sig", "token", "access_token", "id_token", "refresh_token",
    "api_key", "apikey", "key", "password", "passwd", "secret", "client_secret", "auth", "authorization",
})

# scheme://[userinfo@]rest: userinfo is everything before the last "@" of the authority
_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<rest>[^\s'\"<>]*)")
_PARAM = re.compile(r"(?P<sep>[?&;])(?P<name>[^=&;#\s'\"<>]+)=(?P<value>[^&;#\s'\"<>]*)")
_AWS_KEY_ID = re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")
_AWS_SECRET = re.compile(r"(?i)(aws_secret_access_key|aws_session_token|secret_key|secretaccesskey)"
                         r"(\s*[=:]\s*[\"']?)([^\s\"',;&]+)")


def _redact_one(m: re.Match) -> str:
    scheme, rest = m.group("scheme"), m.group("rest")
    end = len(rest)
    for stop in "/?#":
        i = rest.find(stop)
        if i != -1:
            end = min(end, i)
    authority, tail = rest[:end], rest[end:]
    if "@" in authority:
        userinfo, host = authority.rsplit("@", 1)
        user, colon, _ = userinfo.partition(":")
        authority = f"{user}:{MASK}@{host}" if colon and user else f"{MASK}@{host}"
    return scheme + authority + tail


def _redact_param(m: re.Match) -> str:
    if m.group("name").lower() in SECRET_PARAMS and m.group("value"):
        return f"{m.group('sep')}{m.group('name')}={MASK}"
    return m.group(0)


def redact_url(text) -> str:
    """``text`` (a URL, or any message holding URLs) with credentials replaced by ``***``."""
    if text is None:
        return text
    text = str(text)
    if "://" in text:
        text = _URL.sub(_redact_one, text)
    if "=" in text:  # also outside full URLs: "...with url: /key?X-Amz-Signature=..." in an error
        text = _PARAM.sub(_redact_param, text)
    if "AKIA" in text or "ASIA" in text:
        text = _AWS_KEY_ID.sub(MASK, text)
    if "secret" in text.lower() or "session_token" in text.lower():
        text = _AWS_SECRET.sub(lambda m: m.group(1) + m.group(2) + MASK, text)
    return text


redact = redact_url
