"""The body of the Ray tests, run by test_tune_ray.py inside a loopback-only network namespace.

``python ray_body.py OUT_JSON WORK_DIR`` starts a local Ray (2 CPUs, one ``tilecraft_device``),
builds and measures candidates with RayBuilder/RayRunner (good ones and ones that crash,
hang or compute wrong values), tunes a function end to end with the driver as the only
database writer, stops Ray and writes what it saw to OUT_JSON.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
import time

import ray
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


def _runs(out: dict[str, object], good: ms.BuildArtifact) -> None:
    func = add_one()
    arts = [good]
    for kind in ("segfault", "hang", "wrong"):
        text = poison_source(good.source, good.symbol, kind)
        lib = tc.runtime.compile_shared(text).read_bytes()
        arts += [dataclasses.replace(good, source=text, lib_path=None, lib_bytes=lib), good]
    runner = ms.RayRunner(timeout_s=4.0, evaluator=ms.EvaluatorConfig(number=1, repeat=2))
    results = runner.run([ms.RunnerInput(a, ms.args_info(func), func) for a in arts])
    out["run_errors"] = [r.error for r in results]
    out["run_secs"] = [r.run_secs for r in results]


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
    out["tuned_ok"] = sum(r.ok for r in db.get_all_tuning_records())
    applied = ms.ApplyDatabase(work_dir, target=CPU)(tc.IRModule({"f": add_one()}))
    tc.testing.check_numeric(applied["f"], lambda a: a + 1)
    out["applied"] = bool(applied["f"].attrs.get("tc.tuned"))


def main() -> None:
    out_path, work_dir = sys.argv[1], sys.argv[2]
    out: dict[str, object] = {}
    phases: dict[str, float] = {}
    out["phase_seconds"] = phases
    clock = time.monotonic()
    ray.init(
        num_cpus=2,
        resources={"tilecraft_device": 1},
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        _temp_dir=tempfile.mkdtemp(prefix="tcray", dir="/tmp"),
        log_to_driver=False,
    )
    phases["init"] = time.monotonic() - clock
    try:
        out["node_ips"] = sorted({n["NodeManagerAddress"] for n in ray.nodes()})
        clock = time.monotonic()
        results = _builds(out)
        phases["build"] = time.monotonic() - clock
        good = results[0].artifact
        assert good is not None
        clock = time.monotonic()
        _runs(out, good)
        phases["run"] = time.monotonic() - clock
        clock = time.monotonic()
        _tune(out, work_dir)
        phases["tune"] = time.monotonic() - clock
    finally:
        clock = time.monotonic()
        ray.shutdown()
        phases["shutdown"] = time.monotonic() - clock
    with open(out_path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
