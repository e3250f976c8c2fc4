"""The run lock: one writer per output (O_EXCL file, host, pid, heartbeat), stale locks taken over, locks above and below a unit honoured."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import socket
import threading
import time

from curate.stages.errors import SettingsError
from curate.stages.output.names import TMP_MARK, LockedError
from curate.stages.output.unit import Output

log = logging.getLogger('curate.stages.output')


HEARTBEAT = 15.0


DEFAULT_LOCK_TIMEOUT = 120.0


#: the locks :meth:`Lock._check_others` looks at: a unit's, or one in a folder of it (a job's stage)
_LOCK_RE = re.compile(r"^([^/]+/)?_LOCK(\.[^/]+)?$")


def lock_timeout() -> float:
    value = os.environ.get("CURATE_LOCK_TIMEOUT")
    try:
        return float(value) if value else DEFAULT_LOCK_TIMEOUT
    except ValueError:
        raise SettingsError(f"CURATE_LOCK_TIMEOUT must be a number of seconds; got {value!r}") from None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


class Lock:
    """``_LOCK`` of a unit for the life of a run (see the module doc). Use as a context manager."""

    def __init__(self, out: Output, what: str = "curate"):
        self.out = out
        self.rel = out.names["lock"]
        self.what = what
        self.token = secrets.token_hex(8)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _info(self) -> dict:
        return {"host": socket.gethostname(), "pid": os.getpid(), "token": self.token, "what": self.what,
                "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "heartbeat": time.time()}

    @staticmethod
    def stale(info: dict | None, age: float) -> str | None:
        """Why a lock is stale (its holder is gone), or None when it is alive."""
        if not info:
            return f"unreadable lock, {age:.0f}s old" if age > lock_timeout() else None
        if info.get("host") == socket.gethostname() and isinstance(info.get("pid"), int) \
                and not _pid_alive(info["pid"]):
            return f"pid {info['pid']} on {info['host']} is gone"
        if age > lock_timeout():
            return f"no heartbeat from {info.get('host')} pid {info.get('pid')} for {age:.0f}s"
        return None

    @staticmethod
    def holder(info: dict | None) -> str:
        if not info:
            return "an unknown run"
        return f"{info.get('what', 'curate')} (host {info.get('host')}, pid {info.get('pid')}, since {info.get('started')})"

    def _read(self, path: str) -> tuple[dict | None, float]:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
            age = time.time() - os.stat(path).st_mtime
        except FileNotFoundError:
            return None, 0.0
        try:
            info = json.loads(text)
        except ValueError:
            info = None
        if info and isinstance(info.get("heartbeat"), (int, float)):
            age = min(age, time.time() - info["heartbeat"])
        return info, age

    def _check_others(self) -> None:
        """Live locks on directories above this one, or on units/directories below it."""
        base = self.out.url
        paths = []
        parent = os.path.dirname(base)
        while parent and parent != os.path.dirname(parent):
            paths.extend(sorted(_glob_locks(parent, top_only=True)))
            parent = os.path.dirname(parent)
        # other units of this directory (tokenize prefixes) may be written at the same time
        paths.extend(p for p in sorted(_glob_locks(base, top_only=False)) if os.path.dirname(p) != base)
        for path in paths:
            info, age = self._read(path)
            if info is None and age == 0.0:
                continue
            if self.stale(info, age) is None:
                raise LockedError(f"--output {base}: {path} is held by {self.holder(info)}; "
                                  "wait for it to finish (one writer per output)")

    @property
    def path(self) -> str:
        return self.out.path(self.rel)

    def acquire(self) -> Lock:
        if self.out.remote:  # object stores have no O_EXCL; the lock is advisory there
            log.debug("%s: remote output, no lock file", self.out.url)
            return self
        os.makedirs(self.out.url, exist_ok=True)
        self._check_others()
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                info, age = self._read(self.path)
                why = self.stale(info, age)
                if why is None:
                    raise LockedError(f"--output {self.out.url}: locked by {self.holder(info)} ({self.path}); "
                                      "wait for it to finish (one writer per output)") from None
                log.warning("%s: taking over a stale lock (%s)", self.path, why)
                with contextlib.suppress(FileNotFoundError):
                    os.remove(self.path)
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self._info(), f)
            break
        else:
            raise LockedError(f"--output {self.out.url}: could not take the lock {self.path}")
        info, _ = self._read(self.path)
        if not info or info.get("token") != self.token:  # lost a takeover race
            raise LockedError(f"--output {self.out.url}: locked by {self.holder(info)} ({self.path})")
        self._thread = threading.Thread(target=self._beat, name="curate-lock-heartbeat", daemon=True)
        self._thread.start()
        return self

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT):
            info, _ = self._read(self.path)
            if not info or info.get("token") != self.token:
                log.warning("%s: the lock was taken over by %s", self.path, self.holder(info))
                return
            tmp = self.path + f"{TMP_MARK}{os.getpid()}"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump({**info, "heartbeat": time.time()}, f)
            os.replace(tmp, self.path)

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
            info, _ = self._read(self.path)
            if info and info.get("token") == self.token:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(self.path)

    def __enter__(self) -> Lock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _glob_locks(folder: str, top_only: bool) -> list[str]:
    """Lock files directly in ``folder`` and, unless ``top_only``, in its sub-directories (one level)."""
    found = []
    try:
        with os.scandir(folder) as entries:
            for e in entries:
                if e.is_file() and re.match(r"^_LOCK(\.[^/]+)?$", e.name):
                    found.append(e.path)
                elif not top_only and e.is_dir():
                    with contextlib.suppress(OSError), os.scandir(e.path) as sub:
                        found.extend(s.path for s in sub if s.is_file() and re.match(r"^_LOCK(\.[^/]+)?$", s.name))
    except (FileNotFoundError, NotADirectoryError):
        pass
    return found
