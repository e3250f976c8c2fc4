"""Input discovery and identity: files, globs, directories (a curate output's parts), URLs, and what a stage's fingerprint sees of its inputs."""

from __future__ import annotations

import glob as globlib
import os

from curate.stages.dataset.contract import JSONL_SUFFIXES, MANIFEST, PARQUET_SUFFIXES, SUCCESS
from curate.stages.errors import DataError, SettingsError
from curate.stages.paths import glob_files, glob_paths


def expand_inputs(specs, allow_incomplete: bool = False) -> list[str]:
    """Files named by a file, a directory (a stage output) or a glob, sorted, without duplicates."""
    return [path for path, _ in expand_named(specs, allow_incomplete)]


def expand_named(specs, allow_incomplete: bool = False) -> list[tuple[str, str]]:
    """(path, name) of each input file. The name, used in generated ids and messages, is relative to
    the spec that found the file (a file: its base name; a directory: the path inside it; a glob: the
    path below its fixed part), so it does not change when other inputs are added."""
    if isinstance(specs, (str, os.PathLike)):
        specs = [specs]
    named: list[tuple[str, str]] = []
    for spec in map(str, specs):
        if is_url(spec):
            named.extend(_reach(spec, allow_incomplete))
        elif os.path.isdir(spec):
            named.extend((f, os.path.relpath(f, spec)) for f in _dataset_dir_files(spec, allow_incomplete))
        elif os.path.isfile(spec):
            named.append((spec, os.path.basename(spec)))
        elif globlib.has_magic(spec):
            for p in glob_paths(spec):  # named, never skipped: a skipped input is documents lost in silence
                if _kind(p):
                    _check_data_file(p, spec)
            hits = [p for p in glob_files(spec) if _kind(p)]
            if not hits:
                raise SettingsError(f"input {spec}: no JSONL or Parquet file matches")
            root = _glob_root(spec)
            named.extend((f, os.path.relpath(f, root)) for f in hits)
        else:
            raise SettingsError(f"input {spec}: no such file or directory")
    seen, unique = set(), []
    for f, name in named:
        key = f if is_url(f) else os.path.realpath(f)  # each real file once, whatever links lead to it
        if key not in seen:
            seen.add(key)
            unique.append((f, name))
    for f, _ in unique:
        if _kind(f) is None:
            raise SettingsError(
                f"input {f}: unknown format (expected {', '.join(JSONL_SUFFIXES + PARQUET_SUFFIXES)})"
            )
    return unique


def is_url(path) -> bool:
    """An fsspec URL (s3://, gs://, hf://, https://, ...); file:// counts as local."""
    return "://" in str(path) and not str(path).startswith("file://")


def url_fs(url: str):
    """(filesystem, path inside it) of a URL; credentials come from the usual places (environment,
    config files), never from the command line."""
    import fsspec

    return fsspec.core.url_to_fs(url)


def open_input(path: str):
    """A binary file object for a local path or a URL."""
    if not is_url(path):
        return open(path, "rb")
    fs, p = url_fs(path)
    return fs.open(p, "rb")


def _reach(spec: str, allow_incomplete: bool) -> list[tuple[str, str]]:
    """:func:`_expand_url`, a failure to reach the store (no network, no credentials, a refused
    request) named by the input in one line."""
    from curate.stages.errors import CurateError

    try:
        return _expand_url(spec, allow_incomplete)
    except CurateError:
        raise
    except Exception as e:  # ConnectError, NoCredentialsError, ClientError, aiohttp's: whatever the store raises
        detail = " ".join(str(e).split())[:200]
        raise DataError(f"input {spec}: cannot reach it ({type(e).__name__}{': ' + detail if detail else ''}); "
                        "check the network, the address and the credentials") from None


def _expand_url(spec: str, allow_incomplete: bool) -> list[tuple[str, str]]:
    fs, path = url_fs(spec)
    full = fs.unstrip_protocol
    if globlib.has_magic(path):
        hits = sorted(p for p in fs.glob(path) if _kind(p) and fs.isfile(p))
        if not hits:
            raise SettingsError(f"input {spec}: no JSONL or Parquet file matches")
        root = _glob_root(path)
        return [(full(p), os.path.relpath(p, root)) for p in hits]
    if fs.isdir(path):
        spec = spec.rstrip("/")
        return [(f, f[len(spec) + 1:]) for f in _dataset_dir_files(spec, allow_incomplete)]
    try:
        if fs.isfile(path):
            return [(spec, path.rstrip("/").rsplit("/", 1)[-1])]
    except (FileNotFoundError, OSError):
        pass
    raise SettingsError(f"input {spec}: no such file or directory")


def _glob_root(pattern: str) -> str:
    """The directory part of a glob before its first wildcard: 'data/*/x.jsonl' -> 'data'."""
    parts = pattern.split(os.sep)
    fixed = []
    for part in parts[:-1]:
        if globlib.has_magic(part):
            break
        fixed.append(part)
    return os.sep.join(fixed) or ("/" if pattern.startswith("/") else ".")


def _dataset_dir_files(path: str, allow_incomplete: bool) -> list[str]:
    from curate.stages.output import Output

    out = Output.at(path)
    if not out.exists(SUCCESS) and not allow_incomplete and _curate_wrote(out):
        raise SettingsError(
            f"input {path}: no {SUCCESS} in this directory (an unfinished stage output?); "
            f"pass --allow-incomplete to read it anyway, or a glob such as {path.rstrip('/')}/*.jsonl"
        )
    manifest = out.manifest()
    if manifest and manifest.get("curate_output"):
        return _manifest_parts(path, manifest)
    if is_url(path):
        # not a curate output: every data file below, skipping curate's _folders and hidden files
        parts = [f"{path.rstrip('/')}/{rel}" for rel in sorted(out.listing())
                 if _kind(rel) and not any(seg.startswith(("_", ".")) for seg in rel.split("/"))]
        if not parts:
            raise SettingsError(f"input {path}: no JSONL or Parquet files in this directory")
        return parts
    parts = sorted(globlib.glob(os.path.join(path, "part-*")))
    parts = [p for p in parts if _kind(p)]
    if not parts:
        # not a curate output: every data file below, skipping curate's _folders and hidden files
        parts = sorted(
            os.path.join(root, f)
            for root, dirs, names in os.walk(path)
            for f in names
            if _kind(f) and not f.startswith(".")
            and not any(seg.startswith(("_", ".")) for seg in os.path.relpath(root, path).split(os.sep) if seg != ".")
        )
        for p in parts:
            _check_data_file(p, path)
    if not parts:
        raise SettingsError(f"input {path}: no JSONL or Parquet files in this directory")
    return parts


def _check_data_file(p: str, spec: str) -> None:
    """A path named like a data file must be one (SettingsError naming it): a broken link or a folder
    called ``x.jsonl`` was once skipped in silence."""
    if os.path.isfile(p):
        return
    what = (f"a broken symbolic link (to {os.readlink(p)})" if os.path.islink(p) and not os.path.exists(p)
            else "a directory, not a data file" if os.path.isdir(p) else "not a regular file")
    raise SettingsError(f"input {p}: {what}, found by {spec}; remove it or narrow the input")


def _curate_wrote(out) -> bool:
    """The directory is (the start of) a curate output: a manifest, a journal or a lock. A plain folder of
    the user's JSONL or Parquet files has none, and is read as it is."""
    if out.remote:  # a prefix on an object store is judged by its _SUCCESS alone, as it always was
        return True
    return any(e.name.startswith(("_state", "_LOCK", "_manifest", "manifest.json")) for e in os.scandir(out.url))


def _manifest_parts(path: str, manifest: dict) -> list[str]:
    """The data parts a curate output lists, checked against the directory: every listed part
    present with its size, and no other data file beside them (a stray copy, another run's part).

    An unfinished output (read with --allow-incomplete) lists the parts its journal records as done.
    """
    from curate.stages.output import Output, is_control, is_temporary

    out = Output.at(path)
    listing = out.listing()
    if manifest.get("status") == "complete":
        records = manifest.get("outputs", [])
    else:
        records = [f for rec in out.journal().values() if rec.get("status") == "done" for f in rec.get("files", [])]
    parts = {r["path"]: r for r in records if "/" not in r["path"] and _kind(r["path"])}
    for rel, r in sorted(parts.items()):
        if rel not in listing:
            raise DataError(f"input {path}: {rel} is listed in {MANIFEST} but missing")
        if listing[rel] != r["bytes"]:
            raise DataError(f"input {path}: {rel} has {listing[rel]} bytes, {MANIFEST} says {r['bytes']}")
    extra = sorted(rel for rel in listing if "/" not in rel and _kind(rel) and rel not in parts
                   and not is_temporary(rel) and not is_control(rel))
    if extra:
        raise DataError(f"input {path}: {extra[0]} is not listed in {MANIFEST} (a stray or foreign file"
                        f"{f', and {len(extra) - 1} more' if len(extra) > 1 else ''}); remove it or rerun the stage")
    if not parts:
        raise SettingsError(f"input {path}: {MANIFEST} lists no data parts")
    return [out.url_of(rel) for rel in sorted(parts)]


def _kind(path: str) -> str | None:
    name = os.path.basename(str(path)).lower()
    if name.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if name.endswith(JSONL_SUFFIXES):
        return "jsonl"
    return None


def is_complete(path: str) -> bool:
    from curate.stages.output import Output

    return Output.at(path).exists(SUCCESS)


def read_manifest(path: str) -> dict | None:
    from curate.stages.output import Output

    return Output.at(path).manifest()


def input_identity(specs, allow_incomplete: bool = False) -> list:
    """What the fingerprint of a stage sees of its input: upstream fingerprints, else file stats.

    Raw inputs (WARC, dumps, tarballs) count by path, size and modification time like any file, so
    replacing one in place reruns the stage.
    """
    ident = []
    for spec in ([specs] if isinstance(specs, str) else specs):
        if is_url(spec):
            ident.extend(_url_identity(spec))
            continue
        manifest = read_manifest(spec) if os.path.isdir(spec) else None
        if manifest and "fingerprint" in manifest:
            ident.append(_dataset_identity(manifest))
            continue
        files = _all_files(spec)
        if not files:
            ident.append({"spec": spec})
        for f in files:
            st = os.stat(f)
            ident.append({"file": os.path.abspath(f), "size": st.st_size, "mtime_ns": st.st_mtime_ns})
    return ident


def _dataset_identity(manifest: dict) -> dict:
    # a rerun that fetches pending inputs keeps the fingerprint but changes the documents
    pending = manifest.get("pending")
    return {"dataset": manifest["fingerprint"], **({"pending": pending} if pending else {})}


def _url_identity(spec: str) -> list:
    fs, path = url_fs(spec)
    try:
        if fs.isdir(path):
            manifest = read_manifest(spec)
            if manifest and "fingerprint" in manifest:
                return [_dataset_identity(manifest)]
            files = sorted(fs.find(path))
        else:
            files = sorted(fs.glob(path)) if globlib.has_magic(path) else [path]
    except OSError:
        return [{"spec": spec}]
    out = []
    for f in files:
        info = fs.info(f)
        # an object store's version of "modified": its ETag or modification time, whichever it gives
        version = info.get("ETag") or info.get("mtime") or info.get("LastModified") or info.get("last_modified")
        out.append({"file": fs.unstrip_protocol(f), "size": info.get("size"), "version": str(version)})
    return out or [{"spec": spec}]


def _all_files(spec: str) -> list[str]:
    if os.path.isfile(spec):
        return [spec]
    if os.path.isdir(spec):
        found = (os.path.relpath(os.path.join(root, f), spec) for root, _, names in os.walk(spec) for f in names)
        return sorted(os.path.join(spec, rel) for rel in found
                      if not any(seg.startswith(("_", ".")) for seg in rel.split(os.sep)))
    return glob_files(spec)
