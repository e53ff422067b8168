"""Tuning databases: where workloads and measured records live, and how they are matched.

``JSONDatabase(work_dir)`` (two JSON-lines files), ``SQLiteDatabase(path)`` (many concurrent
writers), ``MemoryDatabase()``, the read-only views ``UnionDatabase`` and
``OrderedUnionDatabase``, and ``ScheduleFnDatabase`` (a Python function instead of records).
"""

from .base import Database as Database
from .base import Lookup as Lookup
from .json_db import JSONDatabase as JSONDatabase
from .memory import MemoryDatabase as MemoryDatabase
from .schedule_fn import ScheduleFnDatabase as ScheduleFnDatabase
from .sqlite_db import SQLiteDatabase as SQLiteDatabase
from .union import OrderedUnionDatabase as OrderedUnionDatabase
from .union import UnionDatabase as UnionDatabase
from .workload import FORMAT_VERSION as FORMAT_VERSION
from .workload import IGNORED_ATTRS as IGNORED_ATTRS
from .workload import ModuleEquality as ModuleEquality
from .workload import TuningRecord as TuningRecord
from .workload import Workload as Workload
from .workload import WorkloadKey as WorkloadKey
from .workload import anchor_block as anchor_block
from .workload import target_key as target_key
from .workload import workload_hash as workload_hash
