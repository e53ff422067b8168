"""``tilecraft tune --ray ADDRESS``: the Ray cluster a tuning run builds and measures on.

:func:`ray_workers` connects to the cluster (or uses the connection this process already
has), asks a measuring node what ``-march=native`` means there, and gives the tuner a
:class:`~tilecraft.tune.RayBuilder` and a :class:`~tilecraft.tune.RayRunner`.

Ray's own connection to an address where nothing listens retries for minutes while logging
every attempt, so an address is first probed with one TCP connection
(:data:`PROBE_TIMEOUT_S`): an unreachable cluster is one line and exit code 1 within seconds.
"""

from __future__ import annotations

import importlib
import logging
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from ..errors import TuneError
from ..runtime.compiler import host_march
from ..target import Target
from ..tune import RayBuilder, RayRunner
from ..tune.runner.ray import DEFAULT_RESOURCE

PROBE_TIMEOUT_S = 5.0
"""Seconds the TCP probe of ``--ray ADDRESS`` waits for the cluster to accept a connection."""

MARCH_TIMEOUT_S = 120.0
"""Seconds a measuring node gets to start a worker and report its ``-march=native``."""

_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
_RESOLVED_BY_RAY = frozenset({"auto", "local"})


def parse_address(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of ``host:port``, ``[v6]:port`` or ``ray://host:port``; None for
    ``auto`` and any other form (Ray resolves those, or refuses them itself)."""
    text = address.removeprefix("ray://")
    host, sep, port = text.rpartition(":")
    if address in _RESOLVED_BY_RAY or not sep or not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def probe(address: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Raise :class:`TuneError` unless something accepts a TCP connection at ``address``."""
    parsed = parse_address(address)
    if parsed is None:
        return
    host, port = parsed
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as e:
        why = e.strerror or str(e) or type(e).__name__
        raise TuneError(
            f"--ray {address}: cannot connect: nothing accepts connections at {host}:{port} "
            f"({why}); start the cluster (ray start --head) or fix the address"
        ) from None


def _canonical(ray: ModuleType, address: str) -> tuple[str, int] | None:
    parsed = parse_address(address)
    if parsed is None:
        return None
    host, port = parsed
    return (ray.util.get_node_ip_address() if host in _LOOPBACK else host), port


def _check_same_cluster(ray: ModuleType, address: str) -> None:
    """Refuse ``address`` when this process is connected to another cluster."""
    current = str(ray.get_runtime_context().gcs_address)
    if address == "auto" or _canonical(ray, address) == _canonical(ray, current):
        return
    raise TuneError(
        f"--ray {address}: this process is already connected to the Ray cluster at "
        f"{current}; pass that address, or disconnect first (ray.shutdown())"
    )


@contextmanager
def connected(address: str) -> Iterator[ModuleType]:
    """The ``ray`` module connected to the cluster at ``address``; disconnected afterwards
    only when this call connected it (a caller's connection is used and left open)."""
    try:
        ray = importlib.import_module("ray")
    except ImportError:
        raise TuneError("--ray needs Ray: pip install 'tilecraft[distributed]'") from None
    if ray.is_initialized():
        _check_same_cluster(ray, address)
        yield ray
        return
    probe(address)
    try:
        ray.init(address=address, logging_level=logging.WARNING)
    except Exception as e:  # Ray's connection errors: one line, no traceback
        head = next((ln for ln in str(e).splitlines() if ln.strip()), "")
        raise TuneError(f"--ray {address}: cannot connect: {type(e).__name__}: {head}") from e
    try:
        yield ray
    finally:
        ray.shutdown()


def measuring_march(ray: ModuleType, resource: str = DEFAULT_RESOURCE) -> str:
    """What ``-march=native`` means on a node of the cluster that measures (one holding
    ``resource``), asked there: the driver may be another machine, or have no compiler."""
    if float(ray.cluster_resources().get(resource, 0)) < 1:
        raise TuneError(
            f"--ray: no node of the cluster offers the resource {resource!r}; start measuring "
            f'nodes with resources={{"{resource}": 1}} (ray start --resources=...)'
        )
    task = ray.remote(host_march).options(num_cpus=0, resources={resource: 1}, max_retries=0)
    try:
        return str(ray.get(task.remote(), timeout=MARCH_TIMEOUT_S))
    except ray.exceptions.GetTimeoutError:
        raise TuneError(
            f"--ray: no measuring node reported its -march within {MARCH_TIMEOUT_S:g} s; "
            "pass --march"
        ) from None
    except ray.exceptions.RayError as e:
        head = next((ln for ln in str(e).splitlines() if ln.strip()), "")
        raise TuneError(f"--ray: a measuring node cannot report its -march: {head}") from None


def build_march(target: Target, march: str | None, ray: ModuleType) -> str | None:
    """The ``-march`` of the Ray builds: ``march`` if given, a measuring node's for the host
    target (``-mcpu=native``), else None (a preset or GPU target fixes its own flags)."""
    if march is not None:
        return march
    if target.is_gpu or target.mcpu != "native":
        return None
    return measuring_march(ray)


@contextmanager
def ray_workers(address: str, target: Target, march: str | None) -> Iterator[dict[str, Any]]:
    """``builder`` and ``runner`` keyword arguments of the tuner, on the cluster at
    ``address`` (closed, and the connection closed if this call opened it, afterwards)."""
    with connected(address) as ray:
        builder = RayBuilder(build_march(target, march, ray))
        runner = RayRunner()
        try:
            yield {"builder": builder, "runner": runner}
        finally:
            builder.close()
            runner.close()
