"""Plain C entry points of graph functions: run a compiled model from C, without Python.

Next to its CPython entry (:mod:`tilecraft.codegen.graph_c`), each natively compiled graph
function gets, in the same shared library, three functions of a plain C ABI (``X`` is the
entry's name, ``forward`` for a function ``forward``)::

    int     tc_X(const tc_tensor* inputs, int n_inputs, tc_tensor* outputs, int n_outputs,
                 void* workspace);
    int64_t tc_X_workspace_size(const tc_tensor* inputs, int n_inputs);
    int     tc_X_output_shape(const tc_tensor* inputs, int n_inputs, int64_t* shape);

A function returning a tuple of ``K`` results takes ``n_outputs == K`` outputs, result ``k``
in ``outputs[k]``; ``tc_X_output_shape`` writes the extents of every result one after the
other (result 0's, then result 1's, ...). Each result is written to its own output: one that
is an input, a weight or another result's value is copied there.

and the library gets ``tc_load_weights(dir)`` / ``tc_free_weights()`` / ``tc_weights_error()``
(the bound parameters, read from the ``.npy`` members of an exported library unpacked into
``dir``: :data:`PARAM_MEMBER`) and ``tc_error_string(code)``. :func:`c_header` writes the
documented header a C program includes; :data:`TENSOR_DOC` describes ``tc_tensor``.

The entry checks the inputs' count, rank, dtype and every static and symbolic extent, binds
the symbolic extents from the inputs' shapes, checks the output's rank, dtype and shape, and
calls the kernels in order with every intermediate at its own 64-byte aligned offset of the
caller's workspace (no reuse between intermediates: the size is one sum, queried before the
call). This module only builds text.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ir import DataType, Expr, IntImm, Var
from ..lower.graph_program import GraphProgram, TensorSpec
from . import graph_c_extern as ext
from .graph_c import Kernel, Unsupported, _c_int, _Emitter, extent_c

PARAM_MEMBER = "params/{function}/{index}.npy"
"""Where an exported library keeps constant ``index`` of graph function ``function``
(relative to the unpacked library; ``tc_load_weights`` reads the same paths)."""

ENTRY_PREFIX = "tcg_graph_"
"""The CPython entry of graph function ``X`` is ``tcg_graph_X``; its C entry is ``tc_X``."""

GLOBAL_SYMBOLS = (
    "tc_load_weights", "tc_free_weights", "tc_weights_error", "tc_error_string",
    *ext.GLOBAL_SYMBOLS,
)  # fmt: skip

DTYPE_CODES = {
    "bool": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5, "uint8": 6, "uint16": 7,
    "uint32": 8, "uint64": 9, "float16": 10, "bfloat16": 11, "float32": 12, "float64": 13,
}  # fmt: skip
"""``tc_tensor.dtype`` codes (stable: part of the C ABI)."""

ERRORS = {
    "TC_OK": (0, "success"),
    "TC_ERR_COUNT": (-1, "wrong number of inputs or outputs"),
    "TC_ERR_TYPE": (-2, "an input or output has the wrong rank or dtype"),
    "TC_ERR_SHAPE": (-3, "an extent differs from what the model takes, or overflows"),
    "TC_ERR_NULL": (-4, "a NULL data pointer, shape or workspace"),
    "TC_ERR_WEIGHTS": (-5, "weights not loaded, or tc_load_weights failed"),
    "TC_ERR_EXTERN": (-6, "an external library routine is not set (tc_set_extern), or an "
                          "unknown routine name"),
}  # fmt: skip

TENSOR_DOC = """\
/* A tensor as the entries take it: C-contiguous (row-major, no padding) elements at `data`,
 * `ndim` extents at `shape`, and a TC_DTYPE_* code. On x86-64 and aarch64 (LP64) the layout
 * is: data at offset 0, shape at 8, ndim at 16, dtype at 20; 24 bytes. */
typedef struct tc_tensor {
  void* data;
  const int64_t* shape;
  int32_t ndim;
  int32_t dtype;
} tc_tensor;
"""


def c_names(entry_symbol: str) -> tuple[str, ...]:
    """The C ABI names of the graph function whose CPython entry is ``entry_symbol``."""
    if not entry_symbol.startswith(ENTRY_PREFIX):
        raise Unsupported(f"entry symbol {entry_symbol!r} has no C ABI name")
    base = "tc_" + entry_symbol[len(ENTRY_PREFIX) :]
    suffix = entry_symbol[len(ENTRY_PREFIX) :]
    return (base, f"{base}_workspace_size", f"{base}_output_shape",
            f"tc__run_{suffix}", f"tc__w_{suffix}")  # fmt: skip


def dtype_code(dt: DataType) -> int:
    """The ``tc_tensor.dtype`` code of ``dt``."""
    code = DTYPE_CODES.get(str(dt))
    if code is None:
        raise Unsupported(f"dtype {dt} has no C ABI code")
    return code


def _macros() -> str:
    lines = [f"#define TC_DTYPE_{name.upper()} {code}" for name, code in DTYPE_CODES.items()]
    lines += [f"#define {name} ({code}) /* {text} */" for name, (code, text) in ERRORS.items()]
    return "\n".join(lines)


def prelude() -> str:
    """C shared by the plain entries of a unit (after the native graph prelude)."""
    cases = "\n".join(f'    case {name}: return "{text}";' for name, (_, text) in ERRORS.items())
    return f"""
/* ---- plain C entries (tilecraft.codegen.graph_c_abi) ---- */
{TENSOR_DOC}{_macros()}
TC_EXPORT const char* tc_error_string(int code) {{
  switch (code) {{
{cases}
    default: return "unknown error code";
  }}
}}
static int64_t tc__align(int64_t bytes, int* err) {{
  return tcg__add(bytes, 63, err) & ~INT64_C(63);
}}
"""


class _CEmitter(_Emitter):
    """The plain C entry of one graph function (reuses the CPython entry's checks)."""

    def __init__(
        self, prog: GraphProgram, kernels: Sequence[Kernel | None], entry_symbol: str
    ) -> None:
        super().__init__(prog, [() for _ in range(prog.num_params)], kernels, entry_symbol)
        self.names = c_names(entry_symbol)
        self.gemms = {  # external steps (graph_c_extern): BLAS through caller-set pointers
            n: ext.GemmCall(prog, n, s, self.graph_var)
            for n, s in enumerate(prog.steps)
            if s.is_extern
        }
        if not prog.returns_tuple and prog.ret_slots[0] in prog.const_of_slot:
            raise Unsupported("the result is a constant")
        outs = {s.out for s in prog.steps}
        copied = prog.copied_results() if prog.returns_tuple else (prog.ret_slots[0] not in outs,)
        self.results = list(zip(prog.ret_slots, copied, strict=True))
        # a result a step writes directly: that step's output slot -> the output index
        self.out_of_slot = {s: k for k, (s, c) in enumerate(self.results) if not c}

    def fail(self, cond: str, code: str) -> None:
        self.emit(f"if ({cond}) {{ rc = {code}; goto defer; }}")

    def params(self) -> None:
        """Check the inputs and bind the symbolic extents from their shapes."""
        n = self.prog.num_params
        self.decls.extend(f"int64_t {self.var_names[id(v)]} = 0;" for v in self.prog.shape_vars)
        self.fail(f"n_in != {n}", "TC_ERR_COUNT")
        if n:
            self.fail("!in", "TC_ERR_NULL")
        bound: set[int] = set()
        later: list[tuple[int, int, Expr]] = []
        for i, t in enumerate(self.prog.slot_types[:n]):
            code = dtype_code(t.dtype)
            self.fail(f"in[{i}].ndim != {t.ndim} || in[{i}].dtype != {code}", "TC_ERR_TYPE")
            if t.ndim:
                self.fail(f"!in[{i}].shape", "TC_ERR_NULL")
            self.fail(f"mode == 0 && !in[{i}].data", "TC_ERR_NULL")
            for d, dim in enumerate(t.shape):
                got = f"in[{i}].shape[{d}]"
                if isinstance(dim, IntImm):
                    self.emit(f"if ({got} != {_c_int(dim.value)}) goto defer;")
                elif isinstance(dim, Var) and id(dim) not in bound:
                    bound.add(id(dim))
                    self.emit(f"if ({got} < 0) goto defer;")
                    self.emit(f"{self.graph_var(dim)} = {got};")
                else:
                    later.append((i, d, dim))
        for i, d, dim in later:
            want = extent_c(dim, self.graph_var)
            self.emit(f"if (in[{i}].shape[{d}] != {want}) goto defer;")
        self.emit("if (err) goto defer;")

    def offsets(self) -> None:
        """Each intermediate's offset in the workspace; mode 1 returns the total."""
        self.decls.append("int64_t total = 0;")
        for n, step in enumerate(self.prog.steps):
            if step.out not in self.prog.ret_slots:
                self.decls.append(f"int64_t off{n} = 0;")
                self.emit(f"off{n} = total;")
                self.emit(f"total = tcg__add(total, tc__align({self.sizes[n]}, &err), &err);")
        self.emit("if (err) goto defer;")
        self.emit("if (mode == 1) { *info = total; return TC_OK; }")

    def check_output(self) -> None:
        """Mode 2 writes the outputs' shapes; mode 0 checks the output tensors."""
        types = [self.prog.slot_types[s] for s, _ in self.results]
        dims = [extent_c(d, self.graph_var) for t in types for d in t.shape]
        self.emit(f"const int64_t shape[{max(1, len(dims))}] = {{{', '.join(dims) or '0'}}};")
        self.emit("if (err) goto defer;")
        self.emit("if (mode == 2) {")
        self.emit(f"  for (int d = 0; d < {len(dims)}; ++d) info[d] = shape[d];")
        self.emit("  return TC_OK;")
        self.emit("}")
        self.fail(f"n_out != {len(types)}", "TC_ERR_COUNT")
        self.fail("!out", "TC_ERR_NULL")
        first = 0  # index in `shape` of output k's first extent
        for k, t in enumerate(types):
            self.fail(f"!out[{k}].data", "TC_ERR_NULL")
            code = dtype_code(t.dtype)
            self.fail(f"out[{k}].ndim != {t.ndim} || out[{k}].dtype != {code}", "TC_ERR_TYPE")
            if t.ndim:
                self.fail(f"!out[{k}].shape", "TC_ERR_NULL")
            self.emit(
                f"for (int d = 0; d < {t.ndim}; ++d) "
                f"if (out[{k}].shape[d] != shape[{first} + d]) goto defer;"
            )
            first += t.ndim
        self.fail("total > 0 && !ws", "TC_ERR_NULL")
        weights = f"tc__w_{self.names[0][3:]}"
        for c in range(self.layout.num_consts):
            self.fail(f"!{weights}[{c}]", "TC_ERR_WEIGHTS")

    def copy_results(self) -> None:
        """After the kernels: results that are inputs, weights or repeats, copied to theirs."""
        first = 0
        for k, (slot, copied) in enumerate(self.results):
            t = self.prog.slot_types[slot]
            size = _c_int(t.itemsize)
            for d in range(t.ndim):
                size = f"tcg__mul({size}, shape[{first + d}], &err)"
            first += t.ndim
            if copied:
                self.emit(f"memcpy(out[{k}].data, {self.pointer(slot)}, (size_t)({size}));")

    def pointer(self, slot: int) -> str:
        if slot in self.out_of_slot:
            return f"out[{self.out_of_slot[slot]}].data"
        if slot < self.prog.num_params:
            return f"in[{slot}].data"
        if slot in self.prog.const_of_slot:
            return f"tc__w_{self.names[0][3:]}[{self.prog.const_of_slot[slot]}]"
        n = next(k for k, s in enumerate(self.prog.steps) if s.out == slot)
        return f"(void*)((char*)ws + off{n})"

    def source(self) -> str:
        self.params()
        self.kernel_scalars_and_checks()
        self.step_sizes()
        for gemm in self.gemms.values():
            self.decls.extend(gemm.declare())
            for line in gemm.check():
                self.emit(line)
        self.offsets()
        self.check_output()
        for index in sorted({g.index for g in self.gemms.values()}):
            self.fail(f"!tc__extern[{index}]", "TC_ERR_EXTERN")
        for n, (step, kernel) in enumerate(zip(self.prog.steps, self.kernels, strict=True)):
            ptrs = [self.pointer(a) for a in step.args] + [self.pointer(step.out)]
            if kernel is None:
                self.emit(self.gemms[n].call(*ptrs))
            else:
                self.emit(f"{kernel.symbol}({', '.join([*ptrs, *self.scalars[n]])});")
        self.copy_results()
        entry, ws_size, out_shape, run, weights = self.names
        sig = "const tc_tensor* inputs, int n_inputs"
        return "\n".join(
            [
                f"/* plain C entry of graph function {self.prog.name} */",
                f"static void* {weights}[{max(1, self.layout.num_consts)}];",
                f"static int {run}(const tc_tensor* in, int n_in, tc_tensor* out, int n_out, "
                "void* ws, int mode, int64_t* info) {",
                "  int err = 0, rc = TC_ERR_SHAPE;",
                *("  " + d for d in self.decls),
                *self.lines,
                "  return TC_OK;",
                "defer:",
                "  return rc;",
                "}",
                f"TC_EXPORT int64_t {ws_size}({sig}) {{",
                "  int64_t bytes = 0;",
                f"  int rc = {run}(inputs, n_inputs, 0, 0, 0, 1, &bytes);",
                "  return rc ? rc : bytes;",
                "}",
                f"TC_EXPORT int {out_shape}({sig}, int64_t* shape) {{",
                "  if (!shape) return TC_ERR_NULL;",
                f"  return {run}(inputs, n_inputs, 0, 0, 0, 2, shape);",
                "}",
                f"TC_EXPORT int {entry}({sig}, tc_tensor* outputs, int n_outputs, "
                "void* workspace) {",
                f"  return {run}(inputs, n_inputs, outputs, n_outputs, workspace, 0, 0);",
                "}",
            ]
        )


def entry_source(prog: GraphProgram, kernels: Sequence[Kernel | None], entry_symbol: str) -> str:
    """The plain C entry of ``prog`` whose CPython entry is ``entry_symbol``.

    ``kernels`` has one entry per step: the compiled kernel, or None for an external
    routine's step (:mod:`tilecraft.codegen.graph_c_extern`).

    Raises
    ------
    Unsupported
        When some extent, dtype or kernel parameter has no plain C form.
    """
    return _CEmitter(prog, kernels, entry_symbol).source()


_LOADER = r"""
static char tc__error[1024];
TC_EXPORT const char* tc_weights_error(void) { return tc__error; }
/* read one .npy file (format 1.x-3.x, C order) of exactly `bytes` data bytes and `shape` */
static int tc__read_npy(const char* dir, const tc__weight* w) {
  char path[4096];
  int n = snprintf(path, sizeof path, "%s/%s", dir, w->member);
  if (n < 0 || n >= (int)sizeof path) {
    snprintf(tc__error, sizeof tc__error, "path too long: %s/%s", dir, w->member);
    return TC_ERR_WEIGHTS;
  }
  FILE* f = fopen(path, "rb");
  if (!f) { snprintf(tc__error, sizeof tc__error, "cannot open %s", path); return TC_ERR_WEIGHTS; }
  unsigned char head[12];
  char* text = 0;
  void* data = 0;
  size_t hlen = 0;
  int ok = fread(head, 1, 10, f) == 10 && memcmp(head, "\x93NUMPY", 6) == 0;
  if (ok && head[6] == 1) hlen = head[8] | ((size_t)head[9] << 8);
  else if (ok && (head[6] == 2 || head[6] == 3) && fread(head + 10, 1, 2, f) == 2)
    hlen = head[8] | ((size_t)head[9] << 8) | ((size_t)head[10] << 16) | ((size_t)head[11] << 24);
  else ok = 0;
  if (ok) ok = (text = (char*)malloc(hlen + 1)) != 0 && fread(text, 1, hlen, f) == hlen;
  if (ok) {
    text[hlen] = 0;
    ok = strstr(text, "'fortran_order': False") && strstr(text, w->shape);
  }
  size_t cap = ((size_t)w->bytes + 63) / 64 * 64;
  if (ok) ok = (data = aligned_alloc(64, cap ? cap : 64)) != 0;
  if (ok) ok = fread(data, 1, (size_t)w->bytes, f) == (size_t)w->bytes && fgetc(f) == EOF;
  free(text);
  fclose(f);
  if (!ok) {
    free(data);
    snprintf(tc__error, sizeof tc__error, "%s is not a C-order .npy array of %s with %lld data "
             "bytes", path, w->shape, (long long)w->bytes);
    return TC_ERR_WEIGHTS;
  }
  *w->slot = data;
  return TC_OK;
}
TC_EXPORT void tc_free_weights(void) {
  for (const tc__weight* w = tc__weights; w->member; ++w) { free(*w->slot); *w->slot = 0; }
}
TC_EXPORT int tc_load_weights(const char* dir) {
  tc_free_weights();
  tc__error[0] = 0;
  if (!dir) { snprintf(tc__error, sizeof tc__error, "no directory"); return TC_ERR_NULL; }
  for (const tc__weight* w = tc__weights; w->member; ++w) {
    int rc = tc__read_npy(dir, w);
    if (rc) { tc_free_weights(); return rc; }
  }
  return TC_OK;
}
"""


def weights_source(programs: Sequence[tuple[GraphProgram, str]]) -> str:
    """``tc_load_weights`` and friends for the plain entries of ``programs``.

    ``programs`` pairs each program having a plain entry with its CPython entry's symbol.
    """
    rows = []
    for prog, symbol in programs:
        weights = c_names(symbol)[4]
        for i, arr in enumerate(prog.constants):
            member = PARAM_MEMBER.format(function=prog.name, index=i)
            shape = f"'shape': {tuple(int(d) for d in arr.shape)!r}"
            rows.append(f'  {{"{member}", &{weights}[{i}], INT64_C({arr.nbytes}), "{shape}"}},')
    return "\n".join(
        [
            "typedef struct { const char* member; void** slot; int64_t bytes; const char* shape; }",
            "  tc__weight;",
            "static const tc__weight tc__weights[] = {",
            *rows,
            "  {0, 0, 0, 0},",
            "};",
            _LOADER,
        ]
    )


_HEADER_USE = """\
/* {file}: the plain C interface of an exported tilecraft library.
 * Written by tilecraft {version} for target {target}.
 *
 * The exported file is a zip archive. Unpack it (`unzip model.tc -d model`, or
 * tc.runtime.export.extract_c(path, "model")): model/kernels/library.so is the shared library
 * (it links no Python; it needs the C runtime, libm and the OpenMP runtime it was built with),
 * model/params/<function>/<i>.npy are the bound weights. Then, from C:
 *
 *   void* lib = dlopen("model/kernels/library.so", RTLD_NOW);   (or link against it)
 *   tc_load_weights("model");           once, before any call; 0 on success, else a TC_ERR_*
 *                                       code and tc_weights_error() says which file and why
 *   int64_t ws = tc_forward_workspace_size(inputs, n_inputs);   bytes, or a TC_ERR_* (< 0)
 *   tc_forward_output_shape(inputs, n_inputs, shape);           the output's extents
 *   tc_forward(inputs, n_inputs, outputs, 1, workspace);        0, or a TC_ERR_* code
 *
 * A function returning several results takes one output per result (n_outputs is their
 * count, result k in outputs[k]); its _output_shape writes every result's extents, one result
 * after the other.
 *
 * Symbolic extents (a batch size) are read from the inputs' shapes; the workspace size and
 * the output shape depend on them. The workspace (any alignment; 64 bytes is best) belongs to
 * one call at a time: calls on different threads need their own workspaces and outputs.
 * tc_load_weights and tc_free_weights must not run while a call runs. Weights that are not
 * bound at compile time are ordinary inputs. A failed check writes nothing.
 *
 * GEMMs sent to BLAS (DispatchLibrary) call cblas routines (the library links no BLAS; a
 * function below says which it calls). Once, before the first call, either let the library
 * find them:
 *
 *   tc_load_blas(path);        0, or TC_ERR_EXTERN and tc_extern_error() says why
 *
 * which dlopens `path`, or when it is NULL the library that the environment variable
 * {blas_env} names, else "{blas_default}" (the scipy-openblas32 wheel's
 * library, found through LD_LIBRARY_PATH: python -c "import scipy_openblas32 as s;
 * print(s.get_lib_dir())"), and looks each routine up as "cblas_sgemm", then as
 * "scipy_cblas_sgemm"; or supply them yourself:
 *
 *   void* blas = dlopen("libopenblas.so", RTLD_NOW);      (or link against any LP64 cblas)
 *   tc_set_extern("cblas_sgemm", dlsym(blas, "cblas_sgemm"));     0, or TC_ERR_EXTERN
 *
 * tc_extern_names() lists the routines this library calls (0-terminated); a call whose
 * routine is not set returns TC_ERR_EXTERN and runs nothing. tc_load_blas and tc_set_extern
 * must not run while a call runs. BLAS threads are the BLAS library's own setting.
 */
"""


_BLAS_DOC = {"blas_env": ext.BLAS_ENV, "blas_default": ext.DEFAULT_BLAS_LIBRARY}


def c_header(
    programs: Sequence[tuple[GraphProgram, str]],
    refused: Sequence[tuple[str, str]],
    *,
    file: str,
    version: str,
    target: str,
) -> str:
    """The documented header of a library's plain C entries.

    ``programs`` pairs each program having a plain entry with its CPython entry's symbol;
    ``refused`` lists (graph function, why it has no plain entry).
    """
    guard = "TILECRAFT_" + "".join(c if c.isalnum() else "_" for c in file.upper())
    parts = [
        _HEADER_USE.format(file=file, version=version, target=target, **_BLAS_DOC),
        f"#ifndef {guard}\n#define {guard}\n#include <stdint.h>\n",
        '#ifdef __cplusplus\nextern "C" {\n#endif\n',
        TENSOR_DOC,
        _macros(),
        "",
        "int tc_load_weights(const char* dir);",
        "void tc_free_weights(void);",
        "const char* tc_weights_error(void);",
        "const char* tc_error_string(int code);",
        "int tc_set_extern(const char* name, void* fn);",
        "const char* const* tc_extern_names(void);",
        "int tc_load_blas(const char* path);",
        "const char* tc_extern_error(void);",
    ]
    for prog, symbol in programs:
        entry, ws_size, out_shape, *_ = c_names(symbol)
        n, k = prog.num_params, len(prog.ret_slots)
        outputs = "1 output" if k == 1 else f"{k} outputs"
        lines = [f"/* graph function {prog.name}: {n} inputs, {outputs}"]
        for i, name in enumerate(prog.param_names):
            lines.append(f" *   inputs[{i}] {name}: {_spec(prog.slot_types[i])}")
        for j, slot in enumerate(prog.ret_slots):
            lines.append(f" *   outputs[{j}]: {_spec(prog.slot_types[slot])}")
        for routine in ext.used_routines([prog]):
            lines.append(
                f' *   calls {routine}: tc_load_blas(path) or tc_set_extern("{routine}", fn) first'
            )
        lines.append(" */")
        parts += [
            "",
            *lines,
            f"int64_t {ws_size}(const tc_tensor* inputs, int n_inputs);",
            f"int {out_shape}(const tc_tensor* inputs, int n_inputs, int64_t* shape);",
            f"int {entry}(const tc_tensor* inputs, int n_inputs, tc_tensor* outputs, "
            "int n_outputs, void* workspace);",
        ]
    for name, why in refused:
        parts += ["", f"/* graph function {name} has no plain C entry: {why} */"]
    parts += ["", "#ifdef __cplusplus\n}\n#endif", f"#endif /* {guard} */", ""]
    return "\n".join(parts)


def _spec(t: TensorSpec) -> str:
    dims = ", ".join(str(d.value) if isinstance(d, IntImm) else str(d) for d in t.shape)
    return f"{t.dtype}[{dims}] (TC_DTYPE_{str(t.dtype).upper()})"
