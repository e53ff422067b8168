"""RayBuilder and RayRunner on a local Ray cluster in a loopback-only network namespace.

The test body (ray_body.py) runs in a subprocess under ``unshare --net --pid`` with ``lo`` up
and nothing else, so Ray can reach no address but 127.0.0.1; usage reporting is off; a hard
timeout kills the namespace (every Ray process in it dies with its pid 1). Skipped where
ray is not installed or no namespace can be made (``unshare`` needs root, or unprivileged
user namespaces for ``unshare -r``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# one worker runs the whole module under pytest-xdist (--dist loadgroup): its fixture starts a
# Ray cluster for about 20 s, once
pytestmark = pytest.mark.xdist_group("ray")

HERE = Path(__file__).parent
_NS = ["--net", "--pid", "--fork", "--mount-proc", "--kill-child"]


def _namespace_command() -> list[str] | None:
    """An ``unshare`` prefix giving a loopback-only network namespace, or None."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return None
    for user in ([], ["-r"]):  # root, else an unprivileged user namespace
        cmd = ["unshare", *user, *_NS]
        try:
            probe = subprocess.run(
                [*cmd, "sh", "-c", "ip link set lo up && ip -o link"],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        links = [ln.split(":")[1].strip() for ln in probe.stdout.splitlines() if ":" in ln]
        if probe.returncode == 0 and links == ["lo"]:
            return cmd
    return None


def _phases(out: Path) -> object:
    """The seconds of each phase the test body finished (it rewrites ``out`` after each)."""
    try:
        return json.loads(out.read_text()).get("phase_seconds")
    except (OSError, ValueError):
        return None


@pytest.fixture(scope="module")
def ray_results() -> dict[str, object]:
    if importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed (pip install 'tilecraft[distributed]')")
    prefix = _namespace_command()
    if prefix is None:
        pytest.skip("cannot make a loopback-only network namespace (unshare)")
    with tempfile.TemporaryDirectory(prefix="tcray-test-") as tmp:
        out, work_dir = Path(tmp) / "out.json", Path(tmp) / "db"
        env = {
            **os.environ,
            "RAY_USAGE_STATS_ENABLED": "0",
            "HOME": tmp,  # Ray's token and settings stay in the test folder
            "PYTHONPATH": os.pathsep.join([str(HERE.parents[1]), str(HERE)]),
        }
        body = f"ip link set lo up && exec {sys.executable} {HERE / 'ray_body.py'} {out} {work_dir}"
        try:
            proc = subprocess.run(
                [*prefix, "sh", "-c", body],
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"the Ray test body ran past 300 s; phases done: {_phases(out)}")
        assert proc.returncode == 0, f"phases done: {_phases(out)}\n{proc.stderr[-4000:]}"
        results: dict[str, object] = json.loads(out.read_text())
        results["records_on_disk"] = len(
            (work_dir / "database_tuning_record.json").read_text().splitlines()
        )
    return results


def test_ray_sees_only_loopback(ray_results: dict[str, object]) -> None:
    assert ray_results["node_ips"] == ["127.0.0.1"]


def test_ray_builder_ships_libraries_and_reports_errors(ray_results: dict[str, object]) -> None:
    errors = ray_results["build_errors"]
    assert isinstance(errors, list)
    assert errors[:3] == [None, None, None]
    assert "LowerError" in errors[3]
    assert "threadIdx.x" in errors[3]
    assert ray_results["shipped_bytes"] == [True, True, True, False]


def test_ray_runner_isolates_failures(ray_results: dict[str, object]) -> None:
    errors = ray_results["run_errors"]
    assert isinstance(errors, list)
    assert errors[0::2] == [None] * 4  # the good candidate between the bad ones
    segfault, hang, wrong = errors[1::2]
    assert "WorkerCrashedError" in segfault
    assert "timed out after 4 s" in hang
    assert "cancelled" in hang
    assert wrong.startswith("wrong result: output 'B'")
    secs = ray_results["run_secs"]
    assert isinstance(secs, list)
    assert all(len(s) == 2 and min(s) > 0 for s in secs[0::2])


def test_ray_tuning_end_to_end(ray_results: dict[str, object]) -> None:
    assert ray_results["tuned_records"] == 6
    assert ray_results["tuned_ok"] == 6, ray_results["tuned_errors"]
    assert ray_results["records_on_disk"] == 6  # written by the driver alone
    assert ray_results["applied"] is True


def test_ray_runner_deadline_excludes_worker_start_up(ray_results: dict[str, object]) -> None:
    """A measurement's deadline counts the measurement, not Ray's worker start-up.

    A hanging candidate is cancelled (its worker killed), so the good candidate after it
    waits for a new worker process; every new worker here takes longer to start than the
    2 s timeout (ray_hooks.py). Counted from submission, the good candidate timed out.
    """
    errors = ray_results["slow_start_errors"]
    assert isinstance(errors, list)
    hang, good = errors
    assert "timed out after 2 s" in hang
    assert "cancelled" in hang
    assert good is None
    secs = ray_results["slow_start_secs"]
    assert isinstance(secs, list)
    assert secs[0] is None
    assert len(secs[1]) == 2
    assert min(secs[1]) > 0
    # the premise: both candidates waited for a new worker slower to start than the timeout
    slow_start_s = ray_results["slow_start_s"]
    assert isinstance(slow_start_s, float)
    assert slow_start_s > 2.0
    slow_starts = ray_results["slow_starts"]
    assert isinstance(slow_starts, int)
    assert slow_starts >= 2


def _cli_result(ray_results: dict[str, object], name: str) -> dict[str, object]:
    result = ray_results[name]
    assert isinstance(result, dict)
    return result


def test_cli_tune_on_ray_cluster(ray_results: dict[str, object]) -> None:
    """``tilecraft tune --trials 2 --ray ADDRESS`` as a second driver of the running cluster.

    The command's process has no C compiler (``CC`` names a missing file): its two candidates
    were built on the cluster's workers, and its ``-march`` was asked of a measuring node
    (the host's ``-march`` probe would fail in the command's process).
    """
    cli = _cli_result(ray_results, "cli")
    assert cli["rc"] == 0, cli["stderr"]
    assert "Traceback" not in str(cli["stderr"])
    report = json.loads(str(cli["stdout"]))
    assert report["work_dir"] == ray_results["cli_work_dir"]
    assert report["target"].startswith("cpu")
    (task,) = report["tasks"]
    assert task["task"] == "fused_matmul_add_relu"
    assert task["trials"] == 2
    assert task["failed"] == 0
    assert task["best_s"] > 0
    assert task["library"] is None  # --no-library
    # the records are in the work_dir's database, measured, for the report's target
    records = ray_results["cli_db_lines"]
    assert isinstance(records, list)
    assert len(records) == 2
    assert all(r["error"] is None and min(r["run_secs"]) > 0 for r in records)
    assert {r["target"] for r in records} == {report["target"]}
    means = [sum(r["run_secs"]) / len(r["run_secs"]) for r in records]
    assert task["best_s"] == pytest.approx(min(means), rel=1e-9)
    assert str(ray_results["cli_address"]).startswith("127.0.0.1:")


def test_cli_tune_unreachable_ray_address(ray_results: dict[str, object]) -> None:
    """``--ray 127.0.0.1:1`` (nothing listens): exit code 1, one ``error:`` line naming the
    address, no traceback, within seconds (Ray alone would retry for minutes)."""
    cli = _cli_result(ray_results, "cli_unreachable")
    assert cli["rc"] == 1
    assert cli["stdout"] == ""
    lines = str(cli["stderr"]).strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: --ray 127.0.0.1:1: cannot connect")
    assert "Traceback" not in str(cli["stderr"])
    seconds = ray_results["cli_unreachable_s"]
    assert isinstance(seconds, float)
    assert seconds < 60
