"""The Ray worker set-up hook of the Ray tests: a slow worker start-up, on demand.

ray_body.py starts Ray with ``runtime_env={"worker_process_setup_hook":
"ray_hooks.slow_worker_start"}``, so every Ray worker process runs :func:`slow_worker_start`
as it starts. While the file named by ``$TCRAY_SLOW_START`` exists, a starting worker
appends its process id to it and sleeps :data:`SLOW_START_S` seconds: a worker start-up as
slow as on a heavily loaded machine, on purpose and every time.
"""

from __future__ import annotations

import os
import time

SLOW_START_S = 5.0


def slow_worker_start() -> None:
    """Sleep :data:`SLOW_START_S` seconds while ``$TCRAY_SLOW_START`` names an existing file."""
    flag = os.environ.get("TCRAY_SLOW_START")
    if not flag or not os.path.exists(flag):
        return
    with open(flag, "a") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(SLOW_START_S)
