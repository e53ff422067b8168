"""Worker processes for builders and runners: started fresh, killed and replaced on failure.

Each worker is a new interpreter (``python -m tilecraft.tune._worker``), never a fork of the
tuning process (which may hold threads and locks). Requests and replies are JSON messages
framed by a 4-byte length on the worker's stdin/stdout; the worker's stderr goes to a
temporary file whose tail explains a crash. A worker runs in its own session, so killing
its process group also kills the compiler it may be running, and it dies with its parent
(``PR_SET_PDEATHSIG``), so a killed tuner leaves no orphan measuring a hung kernel.

:class:`WorkerPool` hands requests to idle workers and waits for replies with a deadline per
request. A worker that misses its deadline is killed and replaced; one that dies (segfault,
``exit``, out of memory) is replaced; either way the request gets a failure reply naming
what happened, and the other requests go on.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import struct
import subprocess
import sys
import tempfile
import time
import weakref
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from ..errors import TuneError

Message = dict[str, Any]
_HEADER = struct.Struct(">I")
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
STARTUP_TIMEOUT_S = 120.0
_MAX_START_FAILURES = 3


def encode_frame(msg: Mapping[str, Any]) -> bytes:
    """A length-prefixed JSON frame."""
    body = json.dumps(msg, separators=(",", ":"), allow_nan=False).encode("utf-8")
    return _HEADER.pack(len(body)) + body


def failure(kind: str, error: str) -> Message:
    """A reply standing for a request the worker could not answer."""
    return {"ok": False, "failure": kind, "error": error}


def describe_exit(code: int | None) -> str:
    """``exited with status 3`` / ``was killed by SIGSEGV``."""
    if code is None:
        return "is still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with status {code}"


class Worker:
    """One worker process and its message buffer."""

    def __init__(
        self, env: Mapping[str, str], memory_cap_mb: int | None, label: str, preload: str
    ) -> None:
        self.label = label
        # the log lives as long as the worker; stop() closes it
        self.log: IO[bytes] = tempfile.TemporaryFile(prefix="tilecraft-worker-")  # noqa: SIM115
        cmd = [
            sys.executable,
            "-m",
            "tilecraft.tune._worker",
            "--parent-pid",
            str(os.getpid()),
            "--preload",
            preload,
        ]
        if memory_cap_mb:
            cmd += ["--memory-cap-mb", str(int(memory_cap_mb))]
        full_env = dict(os.environ)
        full_env.update(env)
        paths = [_PACKAGE_ROOT, *filter(None, full_env.get("PYTHONPATH", "").split(os.pathsep))]
        full_env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        try:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.log,
                env=full_env,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as e:
            self.log.close()
            raise TuneError(f"cannot start a {label} worker: {e}") from None
        assert self.proc.stdout is not None
        assert self.proc.stdin is not None
        self.out_fd = self.proc.stdout.fileno()
        os.set_blocking(self.out_fd, False)
        self.started = time.monotonic()
        self.buffer = bytearray()
        self.info: Message | None = None  # the worker's ready message
        self.job: tuple[int, float] | None = None  # (request index, deadline)
        self.warm: set[str] = set()  # "warm" keys of requests it answered
        self.served = 0  # requests answered, weighted by their "weight" (candidates)

    @property
    def ready(self) -> bool:
        """True once the worker said it is ready."""
        return self.info is not None

    def send(self, msg: Mapping[str, Any]) -> bool:
        """Write one request; False when the worker is gone."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(encode_frame(msg))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return False
        return True

    def read(self) -> tuple[list[Message], bool]:
        """(complete messages available now, whether the stream ended)."""
        ended = False
        while True:
            try:
                chunk = os.read(self.out_fd, 1 << 20)
            except BlockingIOError:
                break
            except OSError:
                ended = True
                break
            if not chunk:
                ended = True
                break
            self.buffer += chunk
        messages: list[Message] = []
        while len(self.buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self.buffer)
            if len(self.buffer) < _HEADER.size + size:
                break
            body = bytes(self.buffer[_HEADER.size : _HEADER.size + size])
            del self.buffer[: _HEADER.size + size]
            try:
                msg = json.loads(body)
            except ValueError:
                return messages, True  # a garbled reply: treat the worker as dead
            messages.append(msg if isinstance(msg, dict) else {"ok": False, "error": "bad reply"})
        return messages, ended

    def kill(self) -> None:
        """Kill the worker and everything it started; reap it."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def stop(self) -> None:
        """Ask the worker to exit, then make sure it did; close its log."""
        if self.proc.poll() is None and self.send({"op": "exit"}):
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=2.0)
        self.kill()
        self.log.close()

    def death_note(self) -> str:
        """How the worker ended, with the tail of its stderr."""
        self.kill()
        note = f"the {self.label} worker {describe_exit(self.proc.returncode)}"
        try:
            self.log.seek(0, os.SEEK_END)
            size = self.log.tell()
            self.log.seek(max(0, size - 1500))
            tail = self.log.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            tail = ""
        return f"{note}; its stderr ends with:\n{tail}" if tail else note


def _kill_all(workers: list[Worker]) -> None:
    for worker in workers:
        worker.kill()
        worker.log.close()
    workers.clear()


class WorkerPool:
    """Up to ``size`` workers answering requests in parallel.

    Parameters
    ----------
    size
        Number of workers.
    env
        Environment variables set in every worker (``OMP_NUM_THREADS``...).
    memory_cap_mb
        Address-space limit of each worker and its children (None: no limit).
    label
        ``"builder"`` or ``"runner"``, for messages.
    preload
        ``"build"`` or ``"run"``: what the workers import before saying ready.
    warmup_s
        Extra time for a request whose ``"warm"`` key its worker has not answered yet
        (a runner's first candidate of a workload also builds and runs the reference).
    """

    def __init__(
        self,
        size: int,
        *,
        env: Mapping[str, str] | None = None,
        memory_cap_mb: int | None = None,
        label: str = "worker",
        preload: str = "none",
        warmup_s: float = 0.0,
    ) -> None:
        if size < 1:
            raise TuneError(f"{label} pool: size must be >= 1, got {size}")
        self.size = size
        self.env = dict(env or {})
        self.memory_cap_mb = memory_cap_mb
        self.label = label
        self.preload = preload
        self.warmup_s = warmup_s
        self.workers: list[Worker] = []
        self.started_total = 0
        self._start_failures = 0
        self._timeout_s = 0.0
        self._requests: Sequence[Message] = ()
        # a pool never closed (or collected) still stops its workers, at the latest at exit
        weakref.finalize(self, _kill_all, self.workers)

    def _spawn(self) -> Worker:
        worker = Worker(self.env, self.memory_cap_mb, self.label, self.preload)
        self.workers.append(worker)
        self.started_total += 1
        return worker

    def start(self) -> None:
        """Start workers up to ``size`` (they import tilecraft in the background)."""
        while len(self.workers) < self.size:
            self._spawn()

    def _replace(self, worker: Worker, graceful: bool = True) -> None:
        if graceful:
            worker.stop()
        else:  # hung or dead: it cannot read an exit request
            worker.kill()
            worker.log.close()
        self.workers.remove(worker)
        self._spawn()

    def recycle(self, min_served: int = 0) -> None:
        """Replace every worker that answered at least ``min_served`` requests by a fresh one
        (call between batches, with no request in flight)."""
        for worker in list(self.workers):
            if worker.served >= min_served:
                self._replace(worker)

    def close(self) -> None:
        """Stop every worker."""
        for worker in self.workers:
            worker.stop()
        self.workers.clear()

    def wait_ready(self, timeout_s: float = STARTUP_TIMEOUT_S) -> bool:
        """Start the workers and wait until all said they are ready; False on timeout."""
        self.start()
        deadline = time.monotonic() + timeout_s
        sel = selectors.DefaultSelector()
        try:
            while not all(w.ready for w in self.workers) and time.monotonic() < deadline:
                self._wait(sel, [], deque())
        finally:
            sel.close()
        return all(w.ready for w in self.workers)

    def pids(self) -> list[int]:
        """Process ids of the current workers."""
        return [w.proc.pid for w in self.workers]

    def map(self, requests: Sequence[Message], timeout_s: float) -> list[Message]:
        """Send each request to a worker and return the replies, in order.

        A request whose worker does not answer within ``timeout_s`` (counted from when the
        worker took it) gets ``{"ok": False, "failure": "timeout", ...}``; one whose worker
        died gets ``"failure": "crash"`` with the exit status and stderr tail.
        """
        self.start()
        self._timeout_s = timeout_s
        self._requests = requests
        results: list[Message | None] = [None] * len(requests)
        pending = deque(range(len(requests)))
        sel = selectors.DefaultSelector()
        try:
            while pending or any(w.job for w in self.workers):
                self._dispatch(requests, pending, timeout_s)
                self._wait(sel, results, pending)
        finally:
            sel.close()
        return [r if r is not None else failure("lost", "no reply") for r in results]

    def _dispatch(self, requests: Sequence[Message], pending: deque[int], timeout_s: float) -> None:
        for worker in list(self.workers):
            if not pending:
                return
            if worker.ready and worker.job is None:
                index = pending.popleft()
                if worker.send(requests[index]):
                    warm = requests[index].get("warm")
                    extra = self.warmup_s if warm is not None and warm not in worker.warm else 0.0
                    worker.job = (index, time.monotonic() + timeout_s + extra)
                else:  # died while idle: not the request's fault
                    pending.appendleft(index)
                    self._replace(worker, graceful=False)

    def _wait(
        self, sel: selectors.BaseSelector, results: list[Message | None], pending: deque[int]
    ) -> None:
        now = time.monotonic()
        watched = [w for w in self.workers if w.job is not None or not w.ready]
        deadlines = [w.job[1] if w.job else w.started + STARTUP_TIMEOUT_S for w in watched]
        for w in watched:
            sel.register(w.out_fd, selectors.EVENT_READ, w)
        try:
            sel.select(max(0.0, min(deadlines, default=now + 1.0) - now))
        finally:
            for w in watched:
                sel.unregister(w.out_fd)
        for worker in watched:
            self._collect(worker, results, pending)

    def _collect(self, worker: Worker, results: list[Message | None], pending: deque[int]) -> None:
        messages, ended = worker.read()
        for msg in messages:
            if not worker.ready:
                worker.info = msg
                self._start_failures = 0
            elif worker.job is not None:
                results[worker.job[0]] = msg
                worker.warm.add(str(self._requests[worker.job[0]].get("warm")))
                worker.served += int(self._requests[worker.job[0]].get("weight", 1))
                worker.job = None
        now = time.monotonic()
        if worker.job is not None and (ended or now > worker.job[1]):
            index = worker.job[0]
            if ended:
                results[index] = failure("crash", worker.death_note())
            else:
                results[index] = failure(
                    "timeout",
                    f"timed out after {self._timeout_s:g} s; the {self.label} worker was killed "
                    "and replaced",
                )
            worker.job = None
            self._replace(worker, graceful=False)
        elif not worker.ready and (ended or now > worker.started + STARTUP_TIMEOUT_S):
            self._start_failed(worker)

    def _start_failed(self, worker: Worker) -> None:
        note = worker.death_note()
        self._start_failures += 1
        if self._start_failures >= _MAX_START_FAILURES:
            self.close()
            raise TuneError(f"cannot start {self.label} workers: {note}")
        self._replace(worker, graceful=False)
