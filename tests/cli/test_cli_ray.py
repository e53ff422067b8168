"""``tilecraft tune --ray``: connecting, the connection a caller already has, ``--march``.

These run on a stand-in ``ray`` module (no cluster); tests/tune/test_tune_ray.py runs the
command against a real local cluster.
"""

from __future__ import annotations

import socket
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from tilecraft.cli.ray_cluster import build_march, connected, parse_address, probe
from tilecraft.errors import TuneError
from tilecraft.target import Target


class FakeRay(types.ModuleType):
    """The few ``ray`` calls :mod:`tilecraft.cli.ray_cluster` makes, recorded."""

    def __init__(self, gcs_address: str | None, node_ip: str = "10.0.0.5") -> None:
        super().__init__("ray")
        self.gcs_address = gcs_address
        self.calls: list[tuple[str, Any]] = []
        self.resources: dict[str, float] = {"CPU": 2.0, "tilecraft_device": 1.0}
        self.util = types.SimpleNamespace(get_node_ip_address=lambda: node_ip)
        self.exceptions = types.SimpleNamespace(GetTimeoutError=TimeoutError, RayError=OSError)

    def is_initialized(self) -> bool:
        return self.gcs_address is not None

    def get_runtime_context(self) -> Any:
        return types.SimpleNamespace(gcs_address=self.gcs_address)

    def init(self, address: str, **options: Any) -> None:
        self.calls.append(("init", address))
        self.gcs_address = address

    def shutdown(self) -> None:
        self.calls.append(("shutdown", None))
        self.gcs_address = None

    def cluster_resources(self) -> dict[str, float]:
        return self.resources

    def remote(self, func: Callable[[], str]) -> Any:
        def options(**opts: Any) -> Any:
            self.calls.append(("remote", (func.__name__, opts)))
            return types.SimpleNamespace(remote=lambda: "ref")

        return types.SimpleNamespace(options=options)

    def get(self, ref: object, timeout: float) -> str:
        return "icelake-server"


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> Callable[..., FakeRay]:
    def install(gcs_address: str | None = None) -> FakeRay:
        ray = FakeRay(gcs_address)
        monkeypatch.setitem(sys.modules, "ray", ray)
        return ray

    return install


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_parse_address() -> None:
    assert parse_address("127.0.0.1:6379") == ("127.0.0.1", 6379)
    assert parse_address("ray://head:10001") == ("head", 10001)
    assert parse_address("[::1]:6379") == ("::1", 6379)
    assert parse_address("auto") is None
    assert parse_address("head") is None


def test_connected_uses_the_callers_connection(fake_ray: Callable[..., FakeRay]) -> None:
    """Regression: a process already connected (a driver calling the command in-process) got
    ``ray.init`` again (Ray refuses a second init) and lost its connection to ray.shutdown."""
    ray = fake_ray("10.0.0.5:6379")
    for address in ("10.0.0.5:6379", "127.0.0.1:6379", "auto"):
        with connected(address) as got:
            assert got is ray
    assert ray.calls == []
    assert ray.is_initialized()


def test_connected_refuses_another_cluster(fake_ray: Callable[..., FakeRay]) -> None:
    ray = fake_ray("10.0.0.5:6379")
    refused = pytest.raises(TuneError, match=r"already connected to the Ray cluster at 10.0.0.5")
    with refused, connected("10.0.0.9:6379"):
        pass
    assert ray.calls == []


def test_connected_opens_and_closes_its_own(fake_ray: Callable[..., FakeRay]) -> None:
    ray = fake_ray()
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"127.0.0.1:{server.getsockname()[1]}"
        with connected(address):
            assert ray.calls == [("init", address)]
    assert ray.calls == [("init", address), ("shutdown", None)]


def test_unreachable_address_fails_before_ray_init(fake_ray: Callable[..., FakeRay]) -> None:
    """Regression: Ray's own connection to a closed port retries for minutes, logging."""
    ray = fake_ray()
    address = f"127.0.0.1:{_closed_port()}"
    start = time.monotonic()
    refused = pytest.raises(TuneError, match=rf"--ray {address}: cannot connect: nothing accepts")
    with refused, connected(address):
        pass
    assert time.monotonic() - start < 10
    assert ray.calls == []


def test_probe_ignores_addresses_ray_resolves() -> None:
    probe("auto")  # RAY_ADDRESS or the latest local cluster: Ray's to find


NATIVE = Target("cpu -mcpu=native")  # the host target as on a real host (not a preset)


def test_build_march_asks_a_measuring_node(fake_ray: Callable[..., FakeRay]) -> None:
    """Regression: the host target's builds used the driver's ``-march=native`` (which needs
    a compiler on the driver and describes the driver, not the measuring hosts)."""
    ray = fake_ray("10.0.0.5:6379")
    assert build_march(NATIVE, None, ray) == "icelake-server"
    ((kind, (name, options)),) = ray.calls
    assert (kind, name) == ("remote", "host_march")
    assert options["resources"] == {"tilecraft_device": 1}
    assert build_march(NATIVE, "x86-64-v3", ray) == "x86-64-v3"


def test_build_march_keeps_a_presets_flags(fake_ray: Callable[..., FakeRay]) -> None:
    """Regression: ``--target avx2 --ray`` built with the host's -march, not x86-64-v3."""
    ray = fake_ray("10.0.0.5:6379")
    assert build_march(Target("avx2"), None, ray) is None
    assert ray.calls == []


def test_build_march_needs_a_measuring_node(fake_ray: Callable[..., FakeRay]) -> None:
    ray = fake_ray("10.0.0.5:6379")
    ray.resources = {"CPU": 2.0}
    with pytest.raises(TuneError, match="no node of the cluster offers the resource"):
        build_march(NATIVE, None, ray)


def test_tune_ray_unreachable_is_one_line(
    invoke: Callable[..., Result],
    model_file: Path,
    tmp_path: Path,
    fake_ray: Callable[..., FakeRay],
) -> None:
    fake_ray()
    address = f"127.0.0.1:{_closed_port()}"
    result = invoke("tune", model_file, "--trials", 1, "-w", tmp_path / "w", "--ray", address)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith(f"error: --ray {address}: cannot connect")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ((), "--march applies only with --ray"),
        (("--ray", "127.0.0.1:1", "--target", "avx2"), "fixes its machine flags"),
    ],
)
def test_tune_march_usage(
    invoke: Callable[..., Result],
    model_file: Path,
    tmp_path: Path,
    extra: tuple[str, ...],
    message: str,
) -> None:
    """Regression: ``--march`` was ignored without ``--ray`` and overrode a preset's flags."""
    args = ("tune", model_file, "-w", tmp_path / "w", "--march", "x86-64-v3", *extra)
    result = invoke(*args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert not (tmp_path / "w").exists()
