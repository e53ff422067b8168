"""The body of the Ray tests, run by test_tune_ray.py inside a loopback-only network namespace.

``python ray_body.py OUT_JSON WORK_DIR`` starts a local Ray (2 CPUs, one ``tilecraft_device``),
builds and measures candidates with RayBuilder/RayRunner (good ones and ones that crash,
hang or compute wrong values), tunes a function end to end with the driver as the only
database writer, runs ``tilecraft tune --ray`` as a second driver of the cluster (and at an
address where nothing listens), measures a hanging and a good candidate while every new Ray
worker process takes longer to start than the measurement's timeout (ray_hooks.py), stops Ray
and writes what it saw to OUT_JSON.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import ray
from ray_hooks import SLOW_START_S
from tune_workloads import add_one, poison_source, tile_1d

import tilecraft as tc
from tilecraft import tune as ms
from tilecraft.tune.builder import host_march

CPU = tc.Target("cpu")


def _split(factor: int, bind: bool = False) -> tc.IRModule:
    sch = tc.Schedule(add_one())
    _, inner = sch.split(sch.get_loops(sch.get_block("B"))[0], [None, factor])
    if bind:
        sch.bind(inner, "threadIdx.x")
    return sch.mod


def _builds(out: dict[str, object]) -> list[ms.BuilderResult]:
    builder = ms.RayBuilder(march=host_march(), timeout_s=120)
    results = builder.build(
        [ms.BuilderInput(_split(f), CPU) for f in (4, 8, 16)]
        + [ms.BuilderInput(_split(32, bind=True), CPU)]
    )
    out["build_errors"] = [r.error for r in results]
    out["shipped_bytes"] = [r.artifact is not None and bool(r.artifact.lib_bytes) for r in results]
    return results


def _poisoned(good: ms.BuildArtifact, kind: str) -> ms.BuildArtifact:
    text = poison_source(good.source, good.symbol, kind)
    lib = tc.runtime.compile_shared(text).read_bytes()
    return dataclasses.replace(good, source=text, lib_path=None, lib_bytes=lib)


def _runs(out: dict[str, object], good: ms.BuildArtifact) -> None:
    func = add_one()
    arts = [good]
    for kind in ("segfault", "hang", "wrong"):
        arts += [_poisoned(good, kind), good]
    runner = ms.RayRunner(timeout_s=4.0, evaluator=ms.EvaluatorConfig(number=1, repeat=2))
    results = runner.run([ms.RunnerInput(a, ms.args_info(func), func) for a in arts])
    out["run_errors"] = [r.error for r in results]
    out["run_secs"] = [r.run_secs for r in results]


def _slow_start_runs(out: dict[str, object], good: ms.BuildArtifact) -> None:
    """A hanging candidate, then a good one, each on a new worker process that takes longer
    to start than the timeout: the hang's worker is killed, so the good candidate waits for
    a fresh one (its own runtime_env, OMP_NUM_THREADS=1, keeps other idle workers away)."""
    func = add_one()
    arts = [_poisoned(good, "hang"), good]
    flag = os.environ["TCRAY_SLOW_START"]
    with open(flag, "w"):
        pass
    try:
        runner = ms.RayRunner(
            timeout_s=2.0, num_threads=1, evaluator=ms.EvaluatorConfig(number=1, repeat=2)
        )
        results = runner.run([ms.RunnerInput(a, ms.args_info(func), func) for a in arts])
    finally:
        with open(flag) as f:
            out["slow_starts"] = len(f.read().split())
        os.remove(flag)
    out["slow_start_s"] = SLOW_START_S
    out["slow_start_errors"] = [r.error for r in results]
    out["slow_start_secs"] = [r.run_secs for r in results]


def _tune(out: dict[str, object], work_dir: str) -> None:
    db = ms.tune_tir(
        add_one(),
        CPU,
        work_dir=work_dir,
        max_trials_global=6,
        num_trials_per_iter=3,
        space=tile_1d,
        seed=0,
        builder=ms.RayBuilder(march=host_march()),
        runner=ms.RayRunner(),
    )
    out["tuned_records"] = len(db)
    records = db.get_all_tuning_records()
    out["tuned_ok"] = sum(r.ok for r in records)
    out["tuned_errors"] = [r.error for r in records if not r.ok]
    applied = ms.ApplyDatabase(work_dir, target=CPU)(tc.IRModule({"f": add_one()}))
    tc.testing.check_numeric(applied["f"], lambda a: a + 1)
    out["applied"] = bool(applied["f"].attrs.get("tc.tuned"))


CLI_MODEL = """
from tilecraft.frontend import nn


class Tiny(nn.Module):
    def __init__(self):
        self.fc = nn.Linear(16, 8)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.fc(x))


model = Tiny()
inputs = {"x": nn.spec.Tensor((2, 16), "float32")}
"""


def _cli_tune(folder: str, address: str) -> subprocess.Popen[str]:
    """``tilecraft tune --trials 2 --ray ADDRESS`` as a process of its own, started."""
    model = os.path.join(folder, "tiny.py")
    with open(model, "w") as f:
        f.write(CLI_MODEL)
    command = [sys.executable, "-m", "tilecraft", "tune", model, "--trials", "2", "--no-library"]
    command += ["--ray", address, "-w", os.path.join(folder, "work"), "--json", "-q"]
    # no C compiler in the command's process: its candidates and its -march can come only
    # from the Ray workers (started by this process's Ray, with this process's environment)
    env = {**os.environ, "CC": os.path.join(folder, "no-compiler")}
    return subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _cli(out: dict[str, object], folder: str) -> None:
    """The tilecraft command as a second driver of this cluster, and at an address where
    nothing listens (both at once: most of their time is Python starting up)."""
    address = ray.get_runtime_context().gcs_address
    good_dir, bad_dir = os.path.join(folder, "good"), os.path.join(folder, "bad")
    os.makedirs(good_dir)
    os.makedirs(bad_dir)
    clock = time.monotonic()
    good, bad = _cli_tune(good_dir, address), _cli_tune(bad_dir, "127.0.0.1:1")
    for name, proc in (("cli_unreachable", bad), ("cli", good)):
        try:
            stdout, stderr = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        out[name] = {"rc": proc.returncode, "stdout": stdout, "stderr": stderr}
        out[f"{name}_s"] = time.monotonic() - clock
    out["cli_address"] = address
    out["cli_work_dir"] = os.path.join(good_dir, "work")
    out["cli_db_lines"] = _lines(os.path.join(good_dir, "work", "database_tuning_record.json"))


def _lines(path: str) -> list[dict[str, object]]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _phase(out: dict[str, object], out_path: str, name: str, run: Callable[[], object]) -> object:
    """Run one phase, note its seconds and write what was seen so far (a timed-out run
    still tells which phase it was in)."""
    phases = out.setdefault("phase_seconds", {})
    assert isinstance(phases, dict)
    clock = time.monotonic()
    try:
        return run()
    finally:
        phases[name] = time.monotonic() - clock
        with open(out_path, "w") as f:
            json.dump(out, f)


def main() -> None:
    out_path, work_dir = sys.argv[1], sys.argv[2]
    out: dict[str, object] = {}
    os.environ["TCRAY_SLOW_START"] = os.path.join(tempfile.mkdtemp(prefix="tcslow"), "slow")
    _phase(
        out,
        out_path,
        "init",
        lambda: ray.init(
            num_cpus=2,
            resources={"tilecraft_device": 1},
            include_dashboard=False,
            _node_ip_address="127.0.0.1",
            _temp_dir=tempfile.mkdtemp(prefix="tcray", dir="/tmp"),
            log_to_driver=False,
            runtime_env={"worker_process_setup_hook": "ray_hooks.slow_worker_start"},
        ),
    )
    try:
        out["node_ips"] = sorted({n["NodeManagerAddress"] for n in ray.nodes()})
        results = _phase(out, out_path, "build", lambda: _builds(out))
        assert isinstance(results, list)
        good = results[0].artifact
        assert good is not None
        _phase(out, out_path, "run", lambda: _runs(out, good))
        _phase(out, out_path, "tune", lambda: _tune(out, work_dir))
        cli_dir = tempfile.mkdtemp(prefix="tccli")
        _phase(out, out_path, "cli", lambda: _cli(out, cli_dir))
        _phase(out, out_path, "slow_start", lambda: _slow_start_runs(out, good))
    finally:
        _phase(out, out_path, "shutdown", ray.shutdown)


if __name__ == "__main__":
    main()
