"""Hugging Face hub tokenizers: a hub name resolved once to a snapshot (a commit) whose directory every
worker loads (:func:`resolve_hub`, :func:`hub_directory`), and the dry run's check that a name not in
the local cache can be had (:func:`check_loadable`). Split from :mod:`curate.stages.tokenize.load`,
which re-exports these names."""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import os
from dataclasses import dataclass

from curate.stages.errors import SettingsError

log = logging.getLogger("curate.stages.tokenize.load")

TIKTOKEN_PREFIX = "tiktoken:"


def _looks_like_path(spec: str) -> bool:
    # hub names are NAME or ORG/NAME; anything else is meant as a directory
    return spec.startswith(("/", "./", "../", "~")) or spec.count("/") > 1


#: files in a tokenizer directory that are model weights, not tokenizer definition
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".onnx", ".gguf")


def check_loadable(spec: str) -> None:
    """Before any work (preflight, ``--dry-run``): a hub tokenizer that is not in the local Hugging Face
    cache must be reachable. With ``HF_HUB_OFFLINE`` set it cannot be, and without a network the hub
    does not answer: either is one line naming the tokenizer, not a failure after earlier stages ran.
    Nothing is downloaded here (the stage resolves the name when it runs)."""
    if not is_hub_name(spec):
        return  # tiktoken encodings and directories: check_spec
    from huggingface_hub import constants, snapshot_download

    try:
        cached = snapshot_download(spec, allow_patterns=list(HUB_TOKENIZER_FILES), local_files_only=True)
    except Exception:  # not (completely) cached
        cached = None
    if cached is not None and _has_tokenizer_files(cached):
        return
    if constants.HF_HUB_OFFLINE:
        raise SettingsError(f"tokenizer {spec}: not in the local Hugging Face cache, and HF_HUB_OFFLINE is set; "
                            f"download it first (hf download NAME) or name a tokenizer directory{_tiktoken_hint(spec)}")
    from huggingface_hub import HfApi

    try:
        HfApi().model_info(spec, timeout=HUB_CHECK_SECONDS)
    except Exception as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise SettingsError(f"tokenizer {spec}: not in the local Hugging Face cache, and the hub does not answer "
                            f"for it ({first[:200]}){_tiktoken_hint(spec)}") from None


def _tiktoken_hint(spec: str) -> str:
    """A bare tiktoken encoding name is read as a hub name (``gpt2`` is both): say how to name the encoding."""
    import tiktoken

    return f"; for tiktoken's encoding write 'tiktoken:{spec}'" if spec in tiktoken.list_encoding_names() else ""


#: how long preflight waits for the hub to say a tokenizer that is not cached exists
HUB_CHECK_SECONDS = 10


HUB_TOKENIZER_FILES = ("tokenizer*", "special_tokens_map.json", "added_tokens.json", "vocab*", "merges.txt",
                       "*.model", "*.tiktoken", "config.json", "chat_template*")
#: at least one of these: a snapshot with only config.json holds no tokenizer
_DEFINING_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "vocab.txt", "*.model", "*.tiktoken")


@dataclass(frozen=True)
class HubSnapshot:
    """A hub tokenizer pinned to one commit, resolved once on the client."""

    repo_id: str
    revision: str  # the commit hash (name of the snapshot folder)
    directory: str  # the snapshot folder on the client

    def files_sha256(self) -> str:
        """Hash of the tokenizer files only: whatever else the cache holds for the repository
        (README, weights fetched by another program) does not change it."""
        return _hash_directory(self.directory, only=HUB_TOKENIZER_FILES)


def is_hub_name(spec: str) -> bool:
    """NAME or ORG/NAME that is not a local directory (or meant as one), nor tiktoken:ENC."""
    return not (spec.startswith(TIKTOKEN_PREFIX) or _looks_like_path(spec) or os.path.exists(os.path.expanduser(spec)))


def _has_tokenizer_files(directory: str) -> bool:
    names = os.listdir(directory) if os.path.isdir(directory) else []
    return any(fnmatch.fnmatchcase(n, p) for n in names for p in _DEFINING_FILES)


def resolve_hub(name: str) -> HubSnapshot:
    """The snapshot of hub tokenizer ``name`` that every worker will load: the cached one when the
    cache has its tokenizer files (no network), else the hub's current revision, downloaded
    (tokenizer files only). Run on the client, once per job, so no two workers can load different
    revisions of a repository that changed while the job ran."""
    from huggingface_hub import snapshot_download

    try:
        directory = snapshot_download(name, allow_patterns=list(HUB_TOKENIZER_FILES), local_files_only=True)
    except Exception:  # not (completely) cached
        directory = None
    if directory is None or not _has_tokenizer_files(directory):
        log.info("tokenizer %s: not in the local Hugging Face cache; downloading its tokenizer files", name)
        try:
            directory = snapshot_download(name, allow_patterns=list(HUB_TOKENIZER_FILES))
        except Exception as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise SettingsError(f"tokenizer {name}: cannot find it in the Hugging Face cache or on the hub: "
                                f"{first}") from e
        if not _has_tokenizer_files(directory):
            raise SettingsError(f"tokenizer {name}: no tokenizer files ({', '.join(_DEFINING_FILES)}) "
                                f"in its snapshot {directory}")
    directory = os.path.abspath(directory)
    return HubSnapshot(name, os.path.basename(directory), directory)


def hub_directory(snap: HubSnapshot) -> str:
    """On a worker: the directory of the client's snapshot. A worker that does not see the client's
    cache (another node, another HF_HOME) takes the same commit from its own cache or the hub."""
    if _has_tokenizer_files(snap.directory):
        return snap.directory
    from huggingface_hub import snapshot_download

    patterns = list(HUB_TOKENIZER_FILES)
    try:
        return snapshot_download(snap.repo_id, revision=snap.revision, allow_patterns=patterns, local_files_only=True)
    except Exception:
        return snapshot_download(snap.repo_id, revision=snap.revision, allow_patterns=patterns)


def _hub_snapshot(name: str) -> str | None:
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(name, local_files_only=True)
    except Exception:  # not a cached hub repository: the caller hashes the serialised tokenizer
        return None


def _hash_directory(directory: str, only: tuple[str, ...] | None = None) -> str:
    """sha256 over (relative path, content) of the directory's tokenizer files, in path order
    (``only``: just the files whose relative path matches one of these patterns)."""
    h = hashlib.sha256()
    files = []
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for n in names:
            if not n.startswith(".") and not n.endswith(_WEIGHT_SUFFIXES):
                rel = os.path.relpath(os.path.join(root, n), directory)
                if only is None or any(fnmatch.fnmatchcase(rel.replace(os.sep, "/"), p) for p in only):
                    files.append(rel)
    for rel in sorted(files):
        h.update(rel.replace(os.sep, "/").encode() + b"\0")
        with open(os.path.join(directory, rel), "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        h.update(b"\0")
    return h.hexdigest()
