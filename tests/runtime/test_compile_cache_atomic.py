"""A cache entry is published by one rename; temporaries of a killed writer are removed.

Issue 16, 9d: the commit moved the artifact into place, then its record; a process looking the
key up between the two moves found an artifact without a record, deleted it as corrupt, and
the writer's build failed with a spurious BuildError. And a compile killed with ``kill -9``
left its temporaries in the cache folder for good.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import tilecraft as tc
from tilecraft.runtime import cache
from tilecraft.runtime import compiler as compiler_mod

ROOT = Path(tc.__file__).resolve().parents[1]


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "_fallback", {})
    return tmp_path / "cache"


def test_a_reader_between_any_two_steps_of_a_commit_sees_no_entry_or_a_whole_one(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    key, data = "ab" * 32, b"\x7fELF" + bytes(range(256)) * 8
    seen: list[Path | None] = []
    moves: list[tuple[str, str]] = []
    real_rename, real_replace = os.rename, os.replace

    def look_then(real):  # type: ignore[no-untyped-def]
        def move(src, dst):  # type: ignore[no-untyped-def]
            seen.append(cache.lookup("test", key, ".bin"))  # another process, right now
            moves.append((str(src), str(dst)))
            return real(src, dst)

        return move

    monkeypatch.setattr(os, "rename", look_then(real_rename))
    monkeypatch.setattr(os, "replace", look_then(real_replace))
    with caplog.at_level(logging.INFO, logger="tilecraft"):
        path = cache.store_bytes("test", key, ".bin", data)
        after = cache.lookup("test", key, ".bin")
    publishing = [m for m in moves if Path(m[1]).parent == cache_dir / "test"]
    assert len(publishing) == 1, f"one rename publishes the entry, got {moves}"
    assert seen == [None] * len(moves)
    assert after == path
    assert path.read_bytes() == data
    assert not [r for r in caplog.records if "corrupt" in r.getMessage()]


def test_concurrent_readers_never_find_a_corrupt_entry(
    cache_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    keys = [f"{i:064x}" for i in range(150)]
    done = threading.Event()
    found: set[str] = set()

    def reader() -> None:
        while not done.is_set():
            for key in keys:
                if cache.lookup("race", key, ".bin") is not None:
                    found.add(key)

    def writer(offset: int) -> None:
        for key in keys[offset::2]:
            cache.store_bytes("race", key, ".bin", key.encode() * 4096)

    with caplog.at_level(logging.INFO, logger="tilecraft"):
        readers = [threading.Thread(target=reader) for _ in range(2)]
        writers = [threading.Thread(target=writer, args=(k,)) for k in range(2)]
        for t in readers + writers:
            t.start()
        for t in writers:
            t.join()
        done.set()
        for t in readers:
            t.join()
    assert not [r for r in caplog.records if "corrupt" in r.getMessage()]
    for key in keys:  # nothing a reader did removed a fresh entry
        hit = cache.lookup("race", key, ".bin")
        assert hit is not None
        assert hit.read_bytes() == key.encode() * 4096
    assert found  # the readers did see entries while they were written


def test_a_second_writer_of_a_key_keeps_the_first_entry(cache_dir: Path) -> None:
    first = cache.store_bytes("test", "cd" * 32, ".bin", b"same bytes")
    second = cache.store_bytes("test", "cd" * 32, ".bin", b"same bytes")
    assert first == second
    assert [p.name for p in (cache_dir / "test").iterdir()] == ["cd" * 32]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_temporaries_are_removed_by_the_next_compile(cache_dir: Path) -> None:
    folder = cache_dir / "cpu"
    folder.mkdir(parents=True)
    host = "".join(c if c.isalnum() else "_" for c in socket.gethostname())[:32]
    ns = cache._pid_namespace()
    dead = folder / f"{cache.TMP_PREFIX}{host}-{ns}-{_dead_pid()}-abc"
    old = folder / f"{cache.TMP_PREFIX}elsewhere-1-1-def"
    fresh = folder / f"{cache.TMP_PREFIX}elsewhere-1-1-ghi"
    alive = folder / f"{cache.TMP_PREFIX}{host}-{ns}-{os.getpid()}-jkl"
    # a writer of this host in another PID namespace (a container, ``unshare --pid``): its pid
    # names no process here, yet it may be running
    other_ns = folder / f"{cache.TMP_PREFIX}{host}-{int(ns) + 1}-{_dead_pid()}-mno"
    older_form = folder / f"{cache.TMP_PREFIX}{host}-{_dead_pid()}-pqr"  # host-pid-random
    for d in (dead, old, fresh, alive, other_ns, older_form):
        d.mkdir()
        (d / "x.so").write_bytes(b"partial")
    hour_ago = time.time() - cache.STALE_AFTER_S - 60
    os.utime(old, (hour_ago, hour_ago))
    compiler_mod.compile_shared("int tc_stale_probe(void) { return 3; }\n")
    assert not dead.exists()
    assert not old.exists()
    assert fresh.exists()  # another host's writer may still be at it
    assert alive.exists()  # a writer of this host that still runs
    assert other_ns.exists()  # removed only once stale by age
    assert older_form.exists()  # no namespace in the name: by age only


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare")
def test_a_writer_in_another_pid_namespace_keeps_its_temporary(cache_dir: Path) -> None:
    """A compile started inside ``unshare --pid`` (as the Ray tests' workers run) must not
    delete the temporary of a writer outside it whose pid it cannot see: that made concurrent
    compiles fail with 'cannot write the compiled library' on a cold cache."""
    folder = cache_dir / "cpu"
    folder.mkdir(parents=True)
    ours = cache.new_entry(folder)  # this process's temporary, still being written
    (ours / "x.c").write_text("int x;\n")
    script = "import tilecraft as tc; tc.runtime.compile_shared('int tc_ns_probe(void){return 4;}')"
    cmd = ["unshare", "--pid", "--fork", sys.executable, "-c", script]
    probe = subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        cmd[1:1] = ["-r"]  # an unprivileged user namespace
        probe = subprocess.run(["unshare", "-r", "--pid", "--fork", "true"], check=False)
        if probe.returncode != 0:
            pytest.skip("cannot make a PID namespace here")
    env = {**os.environ, "TILECRAFT_CACHE_DIR": str(cache_dir)}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert ours.exists()
    assert (ours / "x.c").exists()


_KILLED_CHILD = textwrap.dedent(
    """
    import tilecraft as tc
    tc.runtime.compile_shared("int tc_killed_probe(void) { return 9; }\\n")
    """
)


def test_kill_9_during_a_compile_leaves_nothing_after_the_next(
    cache_dir: Path, tmp_path: Path
) -> None:
    real = compiler_mod.find_compiler()
    marker = tmp_path / "compiling"
    slow_cc = tmp_path / "slow-cc"
    slow_cc.write_text(
        "#!/bin/sh\n"
        'case "$*" in *tc_killed_probe*|*.tmp-*) touch "' + str(marker) + '"; sleep 60;; esac\n'
        f'exec "{real}" "$@"\n'
    )
    slow_cc.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CC": str(slow_cc)}
    child = subprocess.Popen([sys.executable, "-c", _KILLED_CHILD], env=env, start_new_session=True)
    try:
        deadline = time.time() + 120
        while not marker.exists() and time.time() < deadline and child.poll() is None:
            time.sleep(0.05)
        assert marker.exists(), "the child never started compiling"
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the child and the compiler it started
        child.wait()
    folder = cache_dir / "cpu"
    left = [p for p in folder.iterdir() if p.name.startswith(cache.TMP_PREFIX)]
    assert left, "the killed compile left no temporary (the test did not kill it mid-way)"
    compiler_mod.compile_shared("int tc_after_kill_probe(void) { return 1; }\n")
    assert not [p for p in folder.iterdir() if p.name.startswith(cache.TMP_PREFIX)]
    assert not list(folder.glob("*.failed.c"))
    shutil.rmtree(folder)
