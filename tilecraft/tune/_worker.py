"""The worker process of builders and runners: ``python -m tilecraft.tune._worker``.

It reads length-prefixed JSON requests on stdin and writes one reply per request on the
original stdout; anything else written to stdout (by a kernel, say) goes to stderr instead,
so it cannot corrupt the replies. Requests: ``{"op": "build", ...}`` (see
:mod:`tilecraft.tune.builder._compile`), ``{"op": "run", ...}`` (see
:mod:`tilecraft.tune.runner._measure`) and ``{"op": "exit"}``.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import faulthandler
import json
import os
import signal
import struct
import sys
import traceback
from typing import IO, Any

_HEADER = struct.Struct(">I")
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> None:
    """Get SIGKILL when the tuning process ends, however it ends (Linux)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(0)


def _cap_memory(megabytes: int) -> None:
    import resource

    limit = megabytes * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _memory_limit() -> int | None:
    """The address-space limit in force, in bytes (None: unlimited or unknown)."""
    try:
        import resource
    except ImportError:
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def _read_exact(stream: IO[bytes], n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _send(out: IO[bytes], msg: dict[str, Any]) -> None:
    try:
        body = json.dumps(msg, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as e:
        text = json.dumps({"ok": False, "error": f"the worker could not encode its reply: {e}"})
        body = text.encode("utf-8")
    out.write(_HEADER.pack(len(body)) + body)
    out.flush()


def preload(role: str) -> None:
    """Import what requests of ``role`` (``build``, ``run``) need before saying ready (not on
    a request's clock)."""
    if role == "build":
        from .builder import _compile  # noqa: F401
    elif role == "run":
        from .runner import _measure  # noqa: F401


def handle(msg: dict[str, Any]) -> dict[str, Any]:
    """Answer one request (every failure of a candidate becomes an error reply)."""
    op = msg.get("op")
    try:
        if op == "build":
            from .builder._compile import handle_build

            return handle_build(msg)
        if op == "run":
            from .runner._measure import handle_run

            return handle_run(msg)
        return {"ok": False, "error": f"unknown request {op!r}"}
    except Exception as e:  # noqa: BLE001  the worker boundary: any failure is the candidate's
        tb = traceback.format_exc(limit=6).strip().splitlines()
        detail = "\n".join(tb[-6:])
        return {"ok": False, "error": f"{type(e).__name__}: {e}", "detail": detail}


def main(argv: list[str] | None = None) -> int:
    """Serve requests until stdin closes or an ``exit`` request arrives."""
    parser = argparse.ArgumentParser(prog="tilecraft.tune._worker")
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--memory-cap-mb", type=int, default=0)
    parser.add_argument("--preload", choices=("build", "run", "none"), default="none")
    args = parser.parse_args(argv)
    _die_with_parent(args.parent_pid)
    if args.memory_cap_mb:
        _cap_memory(args.memory_cap_mb)
    faulthandler.enable()
    preload(args.preload)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints (from kernels or libraries) land in the log
    inp = sys.stdin.buffer
    _send(out, {"ready": True, "pid": os.getpid(), "memory_limit": _memory_limit()})
    while True:
        header = _read_exact(inp, _HEADER.size)
        if header is None:
            return 0
        (size,) = _HEADER.unpack(header)
        body = _read_exact(inp, size)
        if body is None:
            return 0
        msg = json.loads(body)
        if not isinstance(msg, dict) or msg.get("op") == "exit":
            return 0
        _send(out, handle(msg))


if __name__ == "__main__":
    sys.exit(main())
