"""C source of a graph function's native entry point, from its lowered form.

A graph function lowered to a :class:`~tilecraft.lower.graph_program.GraphProgram` becomes
one C function compiled into the same shared library as its kernels, so a forward is one call
from Python. The entry is a CPython ``METH_FASTCALL`` function (its ``PyMethodDef`` is
returned by the exported ``<symbol>_def()``; the runtime's executor
(:class:`tilecraft.runtime.executor.native.NativeGraph`) makes it a builtin function whose
``self`` is the tuple ``(address of the context block, owner)``)::

    static tcg_object* tcg_graph_forward(tcg_object* self, tcg_object* const* args,
                                         ptrdiff_t nargs);

The context block is an int64 array owned by the runtime (slots in :class:`ContextLayout`).
The entry reads each argument through the buffer protocol (functions of the CPython stable
ABI reached through a table, so the library links nothing from Python), checks count, rank,
format (dtype), C-contiguity and every static and symbolic extent, binds the symbolic extents,
checks the values each kernel will receive (int32 range, extents the kernel computes), makes
sure the planned workspace is large enough (calling back into Python to plan it when not),
allocates the result with ``numpy.empty``, releases the GIL and calls the kernels in order,
writing intermediates into the planned storages. A function returning a tuple allocates one
array per result and returns their tuple; a result that is a parameter, a constant or a
repeated value is copied into its array after the kernels ran. Any failed check returns
``None`` with ``ctx[STATUS] = DEFER``: Python then validates the arguments itself, raising the
same errors as the Python executor (see :mod:`tilecraft.runtime.executor`).

Symbolic extents are evaluated in int64 with overflow and division-by-zero checks (a failure
defers to Python, which reports it). This module only builds text: the program's memory plan,
the buffer formats its arguments may have and the kernels' C symbols are given.
"""

from __future__ import annotations

import enum
import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import CodegenError
from ..ir import (
    Add,
    Buffer,
    Expr,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    PrimFunc,
    Sub,
    Var,
)
from ..lower.graph_program import GraphProgram, TensorSpec
from .c import storage_ctype
from .graph_c_prelude import PRELUDE as PRELUDE


class NativeStatus(enum.IntEnum):
    """Why the entry returned ``None`` (``ctx[STATUS]``)."""

    OK = 0
    DEFER = 1  # an argument check failed: validate in Python
    BUSY = 2  # another thread is running this function natively


class Unsupported(CodegenError):  # noqa: N818  (a signal: the executor runs it in Python)
    """The graph function cannot be compiled natively; the Python executor runs it."""


@dataclass(frozen=True)
class ContextLayout:
    """Slot indices of a graph function's context block (int64 words)."""

    num_vars: int
    num_consts: int
    num_steps: int
    num_results: int = 1

    BUSY = 0  # 1 while a native call runs (guards the workspace)
    PROFILE = 1  # nonzero: record per-step nanoseconds and output addresses
    STATUS = 2  # a NativeStatus after a None return
    REPLAN = 3  # PyObject*: callable planning the workspace for ctx[VARS...]
    DTYPE = 4  # PyObject*: the (first) result's numpy dtype
    VARS = 5  # the symbolic extents of the last call, in Function.shape_vars() order

    @property
    def consts(self) -> int:
        """First slot of the constants' data pointers."""
        return self.VARS + self.num_vars

    @property
    def out(self) -> int:
        """First slot of the steps' output pointers (workspace)."""
        return self.consts + self.num_consts

    @property
    def cap(self) -> int:
        """First slot of the bytes available at each step's output pointer."""
        return self.out + self.num_steps

    @property
    def nanos(self) -> int:
        """First slot of the per-step times (profiling)."""
        return self.cap + self.num_steps

    @property
    def addr(self) -> int:
        """First slot of the per-step output addresses (profiling)."""
        return self.nanos + self.num_steps

    def dtype(self, k: int) -> int:
        """The slot of result ``k``'s numpy dtype (PyObject*)."""
        return self.DTYPE if k == 0 else self.addr + self.num_steps + k - 1

    @property
    def size(self) -> int:
        """Number of slots."""
        return self.addr + self.num_steps + self.num_results - 1


@dataclass(frozen=True)
class Kernel:
    """A compiled kernel as the entry calls it: original and lowered function, C symbol."""

    func: PrimFunc
    lowered: PrimFunc
    symbol: str


RELEASE_GIL_BYTES = 1 << 16
"""A native forward releases the GIL while its kernels run when they touch at least this many
bytes (arguments, constants, intermediates and result)."""
_FORMAT_RE = re.compile(r"^[A-Za-z0-9<>=!?@^]+$")
_BINARY: dict[type, str] = {
    Add: "tcg__add",
    Sub: "tcg__sub",
    Mul: "tcg__mul",
    FloorDiv: "tcg__floordiv",
    FloorMod: "tcg__floormod",
}
_INT_RANGE = {8: 2**7, 16: 2**15, 32: 2**31, 64: 2**63}


def _c_int(value: int) -> str:
    if value == -(2**63):
        return "INT64_MIN"
    return f"INT64_C({value})"


def extent_c(e: Expr, env: Callable[[Var], str]) -> str:
    """C text (int64, overflow into ``err``) of a shape expression; ``env`` names its Vars."""
    if isinstance(e, IntImm):
        return _c_int(e.value)
    if isinstance(e, Var):
        return env(e)
    fn = _BINARY.get(type(e))
    if fn is not None:
        return f"{fn}({extent_c(e.a, env)}, {extent_c(e.b, env)}, &err)"  # type: ignore[attr-defined]
    if isinstance(e, (Min, Max)):
        name = "tcg__min" if isinstance(e, Min) else "tcg__max"
        return f"{name}({extent_c(e.a, env)}, {extent_c(e.b, env)})"
    raise Unsupported(f"extent {type(e).__name__}")


class _Emitter:
    """Build the entry of one graph function (see the module docstring)."""

    def __init__(
        self,
        prog: GraphProgram,
        param_formats: Sequence[tuple[str, ...]],
        kernels: Sequence[Kernel | None],
        symbol: str,
    ) -> None:
        self.prog = prog
        self.param_formats = param_formats
        self.step_types = prog.step_types
        self.kernels = kernels
        self.symbol = symbol
        num_consts = len(set(prog.const_of_slot.values()))
        self.layout = ContextLayout(
            len(prog.shape_vars), num_consts, len(prog.steps), len(prog.ret_slots)
        )
        # a tuple's result k written directly by a step: that step's output slot -> k
        self.tuple_of_slot: dict[int, int] = {}
        if prog.returns_tuple:
            copied = prog.copied_results()
            self.tuple_of_slot = {s: k for k, s in enumerate(prog.ret_slots) if not copied[k]}
        self.var_names = {id(v): f"v{i}" for i, v in enumerate(prog.shape_vars)}
        self.lines: list[str] = []
        self.decls: list[str] = []
        self.formats: list[str] = []

    def graph_var(self, v: Var) -> str:
        name = self.var_names.get(id(v))
        if name is None:
            raise Unsupported(f"extent {v.name} is not bound by the parameters")
        return name

    def emit(self, line: str) -> None:
        self.lines.append("  " + line)

    def source(self) -> str:
        self.params()
        self.kernel_scalars_and_checks()
        sizes = self.step_sizes()
        self.workspace(sizes)
        if self.prog.returns_tuple:
            self.tuple_results()
        else:
            self.result()
        self.calls()
        if self.prog.returns_tuple:
            self.tuple_finish()
        lay = self.layout
        busy, status = f"&ctx[{lay.BUSY}]", f"&ctx[{lay.STATUS}]"
        head = [
            f"/* graph function {self.prog.name} */",
            *self.formats,
            f"static tcg_object* {self.symbol}(tcg_object* self, tcg_object* const* args, "
            "ptrdiff_t nargs) {",
            "  const tcg_api* api = tcg__api;",
            "  int64_t* ctx = tcg__ctx(self);",
            f"  if (__atomic_exchange_n({busy}, 1, __ATOMIC_ACQUIRE))",
            f"    return tcg__decline({status}, {int(NativeStatus.BUSY)}, 0);",
            f"  tcg_buffer in[{max(1, self.prog.num_params)}];",
            "  int held = 0, err = 0;",
            "  tcg_object* result = 0;",
            "  void* result_data = 0;",
            *("  " + d for d in self.decls),
            *self.tuple_decls(),
        ]
        release = "  for (int i = 0; i < held; ++i) api->release_buffer(&in[i]);"
        tail = [
            release,
            f"  __atomic_store_n({busy}, 0, __ATOMIC_RELEASE);",
            "  return result;",
            "defer:",
            release,
            f"  return tcg__decline({status}, {int(NativeStatus.DEFER)}, {busy});",
            "fail:",
            release,
            *self.tuple_cleanup(),
            f"  __atomic_store_n({busy}, 0, __ATOMIC_RELEASE);",
            "  return 0;",
            "}",
            f"static tcg_method_def {self.symbol}_method = "
            f'{{"{self.prog.name}", (void*){self.symbol}, TCG_METH_FASTCALL, 0}};',
            f"TC_EXPORT void* {self.symbol}_def(void) {{ return &{self.symbol}_method; }}",
        ]
        return "\n".join([*head, *self.lines, *tail])

    # Step 1: arguments ---------------------------------------------------------------------
    def params(self) -> None:
        n = self.prog.num_params
        self.decls.extend(f"int64_t {self.var_names[id(v)]} = 0;" for v in self.prog.shape_vars)
        self.emit(f"if (nargs != {n}) goto defer;")
        bound: set[int] = set()
        later: list[tuple[int, int, Expr]] = []
        types = self.prog.slot_types[:n]
        for i, (t, fmts) in enumerate(zip(types, self.param_formats, strict=True)):
            if not fmts or not all(_FORMAT_RE.match(f) for f in fmts):
                raise Unsupported(f"no buffer format for {t.dtype}")
            table = f"tcg_fmt_{self.symbol}_{i}"
            quoted = ", ".join(f'"{f}"' for f in fmts)
            self.formats.append(f"static const char* const {table}[] = {{{quoted}, 0}};")
            get = f"api->get_buffer(args[{i}], &in[{i}], TCG_RECORDS_RO)"
            self.emit(f"if ({get}) {{ api->err_clear(); goto defer; }}")
            self.emit(f"held = {i + 1};")
            fmt = f"tcg__format(in[{i}].format, {table})"
            self.emit(f"if (in[{i}].ndim != {t.ndim} || !{fmt} || !tcg__contiguous(&in[{i}]))")
            self.emit("  goto defer;")
            for d, dim in enumerate(t.shape):
                got = f"(int64_t)in[{i}].shape[{d}]"
                if isinstance(dim, IntImm):
                    self.emit(f"if ({got} != {_c_int(dim.value)}) goto defer;")
                elif isinstance(dim, Var) and id(dim) not in bound:
                    bound.add(id(dim))
                    self.emit(f"{self.graph_var(dim)} = {got};")
                else:
                    later.append((i, d, dim))
        for i, d, dim in later:
            want = extent_c(dim, self.graph_var)
            self.emit(f"if ((int64_t)in[{i}].shape[{d}] != {want}) goto defer;")
        self.emit("if (err) goto defer;")

    # Step 2: what each kernel receives --------------------------------------------------------
    def kernel_scalars_and_checks(self) -> None:
        self.scalars: list[list[str]] = []
        for n, (step, kernel) in enumerate(zip(self.prog.steps, self.kernels, strict=True)):
            if kernel is None:  # an external routine: it reads its extents from its arrays
                self.scalars.append([])
                continue
            types = [self._slot_type(a) for a in step.args] + [self.step_types[n]]
            params = kernel.func.params
            if len(params) != len(types) or not all(isinstance(p, Buffer) for p in params):
                raise Unsupported(f"kernel {kernel.func.name} does not take buffers only")
            kvars: dict[int, str] = {}
            bound_to: dict[int, str] = {}  # kernel var -> the graph extent it was bound to
            checks: list[tuple[Expr, Expr]] = []
            for p, t in zip(params, types, strict=True):
                assert isinstance(p, Buffer)
                for e, g in zip(p.shape, t.shape, strict=True):
                    if isinstance(e, Var) and id(e) not in kvars:
                        local = f"k{n}_{len(kvars)}"
                        kvars[id(e)] = local
                        self.decls.append(f"int64_t {local} = 0;")
                        bound_to[id(e)] = extent_c(g, self.graph_var)
                        self.emit(f"{local} = {bound_to[id(e)]};")
                    elif not (isinstance(e, IntImm) and isinstance(g, IntImm)):
                        checks.append((e, g))
            for e, g in checks:
                mine = extent_c(e, functools.partial(_kernel_var, kvars))
                theirs = extent_c(g, self.graph_var)
                if not (isinstance(e, Var) and bound_to.get(id(e)) == theirs):
                    self.emit(f"if ({mine} != {theirs}) goto defer;")
            values: list[str] = []
            for p in kernel.lowered.params[len(params) :]:
                if isinstance(p, Buffer) or id(p) not in kvars:
                    raise Unsupported(f"kernel {kernel.func.name}: parameter {p.name}")
                if not p.dtype.is_int or p.dtype.bits not in _INT_RANGE:
                    raise Unsupported(f"kernel {kernel.func.name}: {p.name} is {p.dtype}")
                lim = _INT_RANGE[p.dtype.bits]
                local = kvars[id(p)]
                self.emit(f"if ({local} < {_c_int(-lim)} || {local} > {_c_int(lim - 1)})")
                self.emit("  goto defer;")
                values.append(f"({storage_ctype(p.dtype)}){local}")
            self.scalars.append(values)
        self.emit("if (err) goto defer;")

    def _slot_type(self, slot: int) -> TensorSpec:
        return self.prog.slot_types[slot]

    # Step 3: workspace -------------------------------------------------------------------------
    def step_sizes(self) -> list[str]:
        sizes = []
        for n, t in enumerate(self.step_types):
            local = f"bytes{n}"
            self.decls.append(f"int64_t {local} = 0;")
            expr = _c_int(t.itemsize)
            for dim in t.shape:
                value = extent_c(dim, self.graph_var)
                if not isinstance(dim, IntImm):
                    self.emit(f"if ({value} < 0) goto defer;")
                expr = f"tcg__mul({expr}, {value}, &err)"
            self.emit(f"{local} = {expr};")
            sizes.append(local)
        self.emit("if (err) goto defer;")
        self.sizes = sizes
        return sizes

    def workspace(self, sizes: list[str]) -> None:
        lay = self.layout
        small = [
            f"{size} > ctx[{lay.cap + n}]"
            for n, (size, step) in enumerate(zip(sizes, self.prog.steps, strict=True))
            if step.out not in self.prog.ret_slots
        ]
        if not small:
            return
        cond = " || ".join(small)
        self.emit(f"if ({cond}) {{")
        for i in range(lay.num_vars):
            self.emit(f"  ctx[{lay.VARS + i}] = v{i};")
        replan = f"(tcg_object*)(intptr_t)ctx[{lay.REPLAN}]"
        self.emit(f"  tcg_object* planned = api->call_object({replan}, 0);")
        self.emit("  if (!planned) goto fail;")
        self.emit("  api->decref(planned);")
        self.emit(f"  if ({cond}) goto defer;")
        self.emit("}")

    # Step 4: result and kernel calls ------------------------------------------------------------
    def result(self) -> None:
        ret = self.prog.ret_slot
        n_params = self.prog.num_params
        if ret < n_params:
            self.emit(f"result = args[{ret}];")
            self.emit("api->incref(result);")
            return
        n = next(k for k, s in enumerate(self.prog.steps) if s.out == ret)
        t = self.step_types[n]
        dims = ", ".join(extent_c(d, self.graph_var) for d in t.shape) or "0"
        self.emit("{")
        self.emit(f"  const int64_t shape[{max(1, t.ndim)}] = {{{dims}}};")
        dtype = f"(tcg_object*)(intptr_t)ctx[{self.layout.DTYPE}]"
        self.emit(f"  result = tcg__result(api, shape, {t.ndim}, {dtype}, &result_data);")
        self.emit("  if (!result) goto fail;")
        self.emit("}")

    def pointer(self, slot: int) -> str:
        n_params = self.prog.num_params
        if slot < n_params:
            return f"in[{slot}].buf"
        if slot in self.prog.const_of_slot:
            return f"(void*)(intptr_t)ctx[{self.layout.consts + self.prog.const_of_slot[slot]}]"
        if slot in self.tuple_of_slot:
            return f"res_data[{self.tuple_of_slot[slot]}]"
        if not self.prog.returns_tuple and slot == self.prog.ret_slot:
            return "result_data"
        n = next(k for k, s in enumerate(self.prog.steps) if s.out == slot)
        return f"(void*)(intptr_t)ctx[{self.layout.out + n}]"

    def calls(self) -> None:
        lay = self.layout
        const_bytes = 0
        for slot in set(self.prog.const_of_slot):
            t = self.prog.slot_types[slot]
            const_bytes += t.itemsize * math.prod(t.static_shape() or ())
        touched = " + ".join(
            [_c_int(const_bytes)]
            + [f"(int64_t)in[{i}].len" for i in range(self.prog.num_params)]
            + self.sizes
        )
        self.emit("{")
        self.emit(f"  const int64_t touched = {touched};")
        self.emit("  /* tiny graphs keep the GIL: releasing it would cost more than the work */")
        self.emit(f"  void* released = touched >= {RELEASE_GIL_BYTES} ? api->save_thread() : 0;")
        self.emit(f"  const int64_t profile = ctx[{lay.PROFILE}];")
        self.emit("  int64_t t0 = profile ? tcg__now() : 0;")
        for n, (step, kernel) in enumerate(zip(self.prog.steps, self.kernels, strict=True)):
            if kernel is None:
                raise Unsupported(f"the external routine {step.func!r} runs through Python")
            ptrs = [self.pointer(a) for a in step.args] + [self.pointer(step.out)]
            args = ", ".join([*ptrs, *self.scalars[n]])
            self.emit(f"  {kernel.symbol}({args});")
            self.emit("  if (profile) {")
            self.emit(f"    int64_t t1 = tcg__now(); ctx[{lay.nanos + n}] = t1 - t0; t0 = t1;")
            self.emit(f"    ctx[{lay.addr + n}] = (int64_t)(intptr_t){ptrs[-1]};")
            self.emit("  }")
        for k, (slot, copied) in enumerate(self._copies()):
            if copied:
                src = self.pointer(slot)
                self.emit(f"  if (rbytes{k}) memcpy(res_data[{k}], {src}, (size_t)rbytes{k});")
        self.emit("  if (released) api->restore_thread(released);")
        self.emit("}")

    # Step 4 for a tuple: one array per result, copies, the tuple ---------------------------------
    def _copies(self) -> list[tuple[int, bool]]:
        if not self.prog.returns_tuple:
            return []
        return list(zip(self.prog.ret_slots, self.prog.copied_results(), strict=True))

    def tuple_decls(self) -> list[str]:
        k = len(self.prog.ret_slots)
        if not self.prog.returns_tuple:
            return []
        return [
            f"  tcg_object* res[{k}] = {{0}};",
            f"  void* res_data[{k}] = {{0}};",
            *(f"  int64_t rbytes{i} = 0;" for i in range(k)),
        ]

    def tuple_cleanup(self) -> list[str]:
        if not self.prog.returns_tuple:
            return []
        k = len(self.prog.ret_slots)
        return [f"  for (int k = 0; k < {k}; ++k) if (res[k]) api->decref(res[k]);"]

    def tuple_results(self) -> None:
        shapes = []
        for k, slot in enumerate(self.prog.ret_slots):
            t = self.prog.slot_types[slot]
            dims = [extent_c(d, self.graph_var) for d in t.shape]
            size = _c_int(t.itemsize)
            for d in dims:
                size = f"tcg__mul({size}, {d}, &err)"
            self.emit(f"rbytes{k} = {size};")
            shapes.append((t, dims))
        self.emit("if (err) goto defer;")  # before any array exists: nothing to release
        for k, (t, dims) in enumerate(shapes):
            self.emit("{")
            self.emit(f"  const int64_t shape[{max(1, t.ndim)}] = {{{', '.join(dims) or '0'}}};")
            dtype = f"(tcg_object*)(intptr_t)ctx[{self.layout.dtype(k)}]"
            self.emit(f"  res[{k}] = tcg__result(api, shape, {t.ndim}, {dtype}, &res_data[{k}]);")
            self.emit(f"  if (!res[{k}]) goto fail;")
            self.emit("}")

    def tuple_finish(self) -> None:
        k = len(self.prog.ret_slots)
        self.emit(f"result = api->tuple_new({k});")
        self.emit("if (!result) goto fail;")
        self.emit(f"for (int k = 0; k < {k}; ++k) {{")
        self.emit("  api->tuple_set_item(result, k, res[k]);  /* steals the reference */")
        self.emit("  res[k] = 0;")
        self.emit("}")


def _kernel_var(kvars: dict[int, str], v: Var) -> str:
    local = kvars.get(id(v))
    if local is None:
        raise Unsupported(f"kernel extent {v.name} is not bound by its arguments")
    return local


def graph_source(
    prog: GraphProgram,
    param_formats: Sequence[tuple[str, ...]],
    kernels: Sequence[Kernel | None],
    symbol: str,
) -> tuple[str, ContextLayout]:
    """The C entry ``symbol`` of graph program ``prog`` calling ``kernels`` (one per step;
    None for an external routine's step, which this entry does not support).

    ``param_formats`` lists, per parameter, the buffer-protocol formats an argument may have
    (its dtype's; the runtime knows them). Returns the text and its context block's layout.

    Raises
    ------
    Unsupported
        When some extent or kernel parameter has no native form (the Python executor runs
        the function instead).
    """
    em = _Emitter(prog, param_formats, kernels, symbol)
    return em.source(), em.layout
