"""The parent's end of one extraction child (:mod:`curate.stages.extract.sandbox` drives it): the
process (its environment: one thread per native library, glibc's malloc told to keep freed memory),
its pipes, the answer frames read and not yet taken, and its start-up handshake."""

from __future__ import annotations

import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time

from curate.stages.extract.sandbox_child import HEADER, Clock

#: pipe buffers to and from the child: a batch of pages crosses in a few writes instead of dozens
PIPE_BYTES = 1 << 20
#: glibc's malloc in the child: freed memory at the top of the heap is kept up to 32 MiB instead of 128 KiB.
#: An HTML parse allocates and frees a few hundred KiB per page, and with the default the heap was
#: shrunk and grown again four times a page (brk), each growth faulting its pages in afresh: the same
#: resiliparse loop costs 120 us a synthetic page instead of 150 (a Rust book page: 2% less). Large
#: blocks go to mmap from 32 MiB, where glibc's own adjustment (off once a threshold is set) would
#: have taken them. Memory a page frees stays with the child, within its --extract-memory bound.
MALLOC = {"MALLOC_TRIM_THRESHOLD_": str(32 << 20), "MALLOC_MMAP_THRESHOLD_": str(32 << 20)}
#: most bytes taken from the child's pipe in one read
READ_BYTES = 1 << 20
#: how long a child may take to start (imports on a busy or networked file system) before it is an error
START_SECONDS = 300.0

#: set as curate exits: no child is started any more, and waits end with SandboxError
STOPPING = threading.Event()


class SandboxError(RuntimeError):
    """The child could not start, or went away while no page was running: not any page's fault."""

    def __init__(self, reason: str):
        super().__init__(f"the extraction process failed: {reason}")
        self.reason = reason


class Child:
    """One started child: its process, its clock, the answer bytes read and not yet taken."""

    def __init__(self, memory: int | None, preload: str | None):
        clock, fd = Clock.create()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
               # one thread per native library: thread pools reserve address space the bound counts
               "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "CURATE_SANDBOX_MEMORY": str(memory or 0), "CURATE_SANDBOX_CLOCK": str(fd),
               "CURATE_SANDBOX_PARENT": str(os.getpid()), "CURATE_SANDBOX_PRELOAD": preload or ""}
        for name, value in MALLOC.items():  # the user's own settings win
            env.setdefault(name, value)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", "from curate.stages.extract.sandbox_child import serve; serve()"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, pass_fds=(fd,),
                # its own session: a terminal's Ctrl-C to curate's process group would reach it while
                # its interpreter starts, before it can ignore SIGINT (a "Fatal Python error" on the
                # terminal); it ends with its parent all the same (PR_SET_PDEATHSIG)
                start_new_session=True)
        finally:
            os.close(fd)
        self.clock = clock
        for stream in (self.proc.stdin, self.proc.stdout):  # fewer switches per batch (Linux; else as is)
            try:
                import fcntl

                fcntl.fcntl(stream.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
            except OSError:
                pass
        self.buf = bytearray()  # answer bytes read: those before self._at are taken
        self._at = 0
        self._chunk: bytearray | None = None  # what read() reads into, kept: see read()
        self.ready = False
        self.batch = 0  # batches sent, as the child counts them on its clock

    def take(self):
        """The next whole frame among the bytes read, or None."""
        buf, at = self.buf, self._at
        if len(buf) - at < HEADER.size:
            return None
        (n,) = HEADER.unpack_from(buf, at)
        end = at + HEADER.size + n
        if len(buf) < end:
            return None
        with memoryview(buf) as view:
            obj = pickle.loads(view[at + HEADER.size:end])
        self._at = end  # the bytes taken go at the next read, all at once, not a frame at a time
        return obj

    def read(self, seconds: float) -> bool:
        """Bytes of the child within ``seconds`` (False: none yet); EOFError when it is gone."""
        fd = self.proc.stdout.fileno()
        if not select.select([fd], [], [], max(seconds, 0.0))[0]:
            return False
        # into one buffer kept for the child's life: os.read made a new 1 MiB bytes object each time,
        # mapped and unmapped by malloc (100 us a read of 350 kB, against 21)
        if self._chunk is None:
            self._chunk = bytearray(READ_BYTES)
        k = os.readv(fd, [self._chunk])
        if not k:
            raise EOFError
        del self.buf[:self._at]
        self._at = 0
        with memoryview(self._chunk) as view:
            self.buf += view[:k]
        return True

    def wait_ready(self) -> None:
        """Its ``ready`` frame (SandboxError with the child's reason when it cannot start)."""
        deadline = time.monotonic() + START_SECONDS
        while not self.ready:
            answer = self.take()
            if answer is not None:
                if answer[0] != "ready":
                    raise SandboxError(f"it could not start: {answer[1]}")
                self.ready = True
                return
            try:
                if not self.read(min(deadline - time.monotonic(), 1.0)) and time.monotonic() >= deadline:
                    raise SandboxError(f"it did not start within {START_SECONDS:g} s")
            except EOFError:
                raise SandboxError(f"it ended as it started ({exit_reason(self.proc.wait())})") from None
            if STOPPING.is_set():
                raise SandboxError("curate is exiting")

    def kill(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass

    def close(self, graceful: bool = False) -> None:
        proc = self.proc
        if graceful and proc.poll() is None:
            try:
                proc.stdin.close()  # EOF: the child's loop returns
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self.clock.close()


def exit_reason(code: int) -> str:
    return f"signal {-code}" if code < 0 else f"exit {code}"
