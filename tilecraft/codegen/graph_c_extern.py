"""External library calls in the plain C entries: BLAS GEMMs through caller-set pointers.

A graph program whose GEMMs ``DispatchLibrary`` sent to BLAS (``call_extern("blas.gemm")``
steps) runs from C through the same plain entry as any other
(:mod:`tilecraft.codegen.graph_c_abi`): the library does not link a BLAS, it calls the cblas
routine through a function pointer the C program sets once, before the first call::

    int tc_set_extern(const char* name, void* fn);   /* TC_OK, or TC_ERR_EXTERN: unknown name */
    const char* const* tc_extern_names(void);        /* the routines this library calls, 0-ended */

``name`` is the standard cblas name (``"cblas_sgemm"`` for float32, ``"cblas_dgemm"`` for
float64) and ``fn`` any routine with the standard cblas signature and 32-bit integers (LP64
BLAS: OpenBLAS, MKL's ``lp64``, BLIS, the ``scipy-openblas32`` wheel's library, whose symbols
carry the prefix ``scipy_``). An entry whose routine is not set returns ``TC_ERR_EXTERN``
before any kernel runs; extents that do not fit the 32-bit sizes give ``TC_ERR_SHAPE``. The
number of BLAS threads is the BLAS library's own setting (``OPENBLAS_NUM_THREADS``).

Or the library finds them itself, once, before the first call::

    int tc_load_blas(const char* path);   /* TC_OK, or TC_ERR_EXTERN: tc_extern_error() says why */
    const char* tc_extern_error(void);

``tc_load_blas`` ``dlopen``-s ``path``; when ``path`` is NULL or empty, the library the
environment variable ``TILECRAFT_BLAS_LIBRARY`` names (:data:`BLAS_ENV`), else
:data:`DEFAULT_BLAS_LIBRARY`, the scipy-openblas32 wheel's library (found through the
loader's path: ``LD_LIBRARY_PATH`` holding the wheel's ``lib`` folder). Each routine this
library calls is looked up under its cblas name, then with each of :data:`SYMBOL_PREFIXES`;
the routines are set only when all are found. A library calling no routine loads nothing.
The exported manifest records the routines, the default library and the lookup
(:func:`manifest_entry`).

A ``blas.gemm`` step computes ``out[..., M, N] = A[..., M, K] @ B[..., K, N]`` with the
layouts and batching of :mod:`tilecraft.runtime.executor.extern`: one call when the batch
folds into M, else one call per batch. This module only builds text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..ir import Var
from ..lower.graph_program import GraphProgram, GraphStep, TensorSpec
from .graph_c import Unsupported, extent_c

EXTERN_NAMES = ("cblas_sgemm", "cblas_dgemm")
"""The routines ``tc_set_extern`` accepts; a routine's index is its slot in the table."""

_GEMM_ROUTINE = {"float32": "cblas_sgemm", "float64": "cblas_dgemm"}

DEFAULT_BLAS_LIBRARY = "libscipy_openblas.so"
"""The library ``tc_load_blas(NULL)`` opens when the environment names none (the
scipy-openblas32 wheel's, ``tilecraft[blas]``)."""
BLAS_ENV = "TILECRAFT_BLAS_LIBRARY"
"""The environment variable naming the BLAS library ``tc_load_blas(NULL)`` opens."""
SYMBOL_PREFIXES = ("", "scipy_")
"""Prefixes ``tc_load_blas`` tries, in order, before a routine's cblas name."""

GLOBAL_SYMBOLS = ("tc_set_extern", "tc_extern_names", "tc_load_blas", "tc_extern_error")


def step_routine(prog: GraphProgram, step: GraphStep) -> str:
    """The cblas routine a ``call_extern`` step of ``prog`` calls.

    Raises
    ------
    Unsupported
        For a routine or dtype with no plain C form.
    """
    if step.func != "blas.gemm":
        raise Unsupported(f"the external routine {step.func!r} has no plain C form")
    dtype = str(prog.slot_types[step.out].dtype)
    name = _GEMM_ROUTINE.get(dtype)
    if name is None:
        raise Unsupported(f"blas.gemm on {dtype} has no plain C form")
    return name


def used_routines(programs: Sequence[GraphProgram]) -> list[str]:
    """The cblas routines the extern steps of ``programs`` call, in table order."""
    used = {step_routine(p, s) for p in programs for s in p.steps if s.is_extern}
    return [n for n in EXTERN_NAMES if n in used]


def manifest_entry(used: Sequence[str]) -> dict[str, object] | None:
    """What an exported library's manifest records of the routines its C entries call
    (None: none): the routines, the loader function and how it finds the library."""
    if not used:
        return None
    return {
        "routines": list(used),
        "loader": "tc_load_blas",
        "default_library": DEFAULT_BLAS_LIBRARY,
        "environment": BLAS_ENV,
        "symbol_prefixes": list(SYMBOL_PREFIXES),
    }


_ERROR_TEXT = """static char tc__extern_error[1024];
TC_EXPORT const char* tc_extern_error(void) { return tc__extern_error; }
"""


def _loader(used: Sequence[str]) -> str:
    """``tc_load_blas`` and ``tc_extern_error``: dlopen a BLAS, dlsym the used routines."""
    if not used:
        return (
            _ERROR_TEXT + "TC_EXPORT int tc_load_blas(const char* p) { (void)p; return TC_OK; }\n"
        )
    slots = ", ".join(str(EXTERN_NAMES.index(n)) for n in used)
    prefixes = ", ".join([*(f'"{p}"' for p in SYMBOL_PREFIXES), "0"])
    body = f"""#include <dlfcn.h>
static const int tc__extern_slots[] = {{{slots}}};
static const char* const tc__extern_prefixes[] = {{{prefixes}}};
TC_EXPORT int tc_load_blas(const char* path) {{
  if (!path || !*path) path = getenv("{BLAS_ENV}");
  if (!path || !*path) path = "{DEFAULT_BLAS_LIBRARY}";
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {{
    const char* why = dlerror();
    snprintf(tc__extern_error, sizeof tc__extern_error, "cannot open the BLAS library %s: %s",
             path, why ? why : "unknown error");
    return TC_ERR_EXTERN;
  }}
  void* found[{len(used)}];
  char symbol[128];
  for (int i = 0; i < {len(used)}; ++i) {{
    const char* name = tc__extern_known[tc__extern_slots[i]];
    found[i] = 0;
    for (int p = 0; tc__extern_prefixes[p] && !found[i]; ++p) {{
      snprintf(symbol, sizeof symbol, "%s%s", tc__extern_prefixes[p], name);
      found[i] = dlsym(lib, symbol);
    }}
    if (!found[i]) {{
      snprintf(tc__extern_error, sizeof tc__extern_error,
               "the BLAS library %s has no %s (nor a prefixed one)", path, name);
      dlclose(lib);
      return TC_ERR_EXTERN;
    }}
  }}
  for (int i = 0; i < {len(used)}; ++i) tc__extern[tc__extern_slots[i]] = found[i];
  tc__extern_error[0] = 0;
  return TC_OK;  /* the library stays open: its routines are in use */
}}
"""
    return _ERROR_TEXT + body


def prelude(used: Sequence[str]) -> str:
    """``tc_set_extern``, ``tc_extern_names``, ``tc_load_blas`` and the GEMM helper (after the
    ABI prelude)."""
    names = ", ".join([*(f'"{n}"' for n in EXTERN_NAMES), "0"])
    listed = ", ".join([*(f'"{n}"' for n in used), "0"])
    return _prelude_text(names, listed) + _loader(used)


def _prelude_text(names: str, listed: str) -> str:
    return f"""
/* ---- external library routines (tilecraft.codegen.graph_c_extern) ---- */
typedef void (*tc__sgemm_fn)(int, int, int, int, int, int, float, const float*, int,
                             const float*, int, float, float*, int);
typedef void (*tc__dgemm_fn)(int, int, int, int, int, int, double, const double*, int,
                             const double*, int, double, double*, int);
static const char* const tc__extern_known[] = {{{names}}};
static const char* const tc__extern_used[] = {{{listed}}};
static void* tc__extern[{len(EXTERN_NAMES)}];
TC_EXPORT const char* const* tc_extern_names(void) {{ return tc__extern_used; }}
TC_EXPORT int tc_set_extern(const char* name, void* fn) {{
  if (!name) return TC_ERR_NULL;
  for (int i = 0; tc__extern_known[i]; ++i)
    if (strcmp(name, tc__extern_known[i]) == 0) {{ tc__extern[i] = fn; return TC_OK; }}
  return TC_ERR_EXTERN;
}}
/* C[b] = op(A[b]) @ op(B[b]), row-major; `which` 0: float32, 1: float64. Extents were
 * checked against INT_MAX; the batch folds into M when B is shared and A not transposed. */
static void tc__gemm(int which, int ta, int tb, int64_t batch, int64_t m, int64_t n, int64_t k,
                     int a_batched, int b_batched, const void* a, const void* b, void* c) {{
  const int64_t size = which ? 8 : 4;
  if (m == 0 || n == 0 || batch == 0) return;
  if (k == 0) {{ memset(c, 0, (size_t)(batch * m * n * size)); return; }}
  const int fold = !b_batched && !ta && (a_batched || batch == 1);
  const int64_t calls = fold ? 1 : batch, rows = fold ? m * batch : m;
  const int lda = (int)(ta ? m : k), ldb = (int)(tb ? k : n);
  const int opa = ta ? 112 : 111, opb = tb ? 112 : 111;
  for (int64_t i = 0; i < calls; ++i) {{
    const char* pa = (const char*)a + (a_batched ? i * m * k * size : 0);
    const char* pb = (const char*)b + (b_batched ? i * k * n * size : 0);
    char* pc = (char*)c + i * m * n * size;
    if (which)
      ((tc__dgemm_fn)tc__extern[1])(101, opa, opb, (int)rows, (int)n, (int)k, 1.0,
                                    (const double*)pa, lda, (const double*)pb, ldb, 0.0,
                                    (double*)pc, (int)n);
    else
      ((tc__sgemm_fn)tc__extern[0])(101, opa, opb, (int)rows, (int)n, (int)k, 1.0f,
                                    (const float*)pa, lda, (const float*)pb, ldb, 0.0f,
                                    (float*)pc, (int)n);
  }}
}}
"""


class GemmCall:
    """The C of one ``blas.gemm`` step: its extents (checked early) and its call."""

    def __init__(
        self, prog: GraphProgram, n: int, step: GraphStep, env: Callable[[Var], str]
    ) -> None:
        self.routine = step_routine(prog, step)
        attrs = dict(step.extern or ())
        self.trans_a, self.trans_b = bool(attrs.get("trans_a")), bool(attrs.get("trans_b"))
        a, b = (prog.slot_types[s] for s in step.args)
        out: TensorSpec = prog.slot_types[step.out]
        if out.ndim < 2 or a.ndim < 2 or b.ndim < 2:
            raise Unsupported("blas.gemm needs operands and a result of rank 2 or more")
        self.n = n
        self.a_batched, self.b_batched = a.ndim > 2, b.ndim > 2
        k_dim = a.shape[-2] if self.trans_a else a.shape[-1]
        batch: str = "INT64_C(1)"
        for d in out.shape[:-2]:
            batch = f"tcg__mul({batch}, {extent_c(d, env)}, &err)"
        self.extents = {
            "batch": batch,
            "m": extent_c(out.shape[-2], env),
            "n": extent_c(out.shape[-1], env),
            "k": extent_c(k_dim, env),
        }

    @property
    def index(self) -> int:
        """The routine's slot in the table ``tc_set_extern`` fills."""
        return EXTERN_NAMES.index(self.routine)

    def local(self, what: str) -> str:
        """The C local holding extent ``what`` of this step."""
        return f"g{self.n}_{what}"

    def declare(self) -> list[str]:
        """Declarations of the extent locals."""
        return [f"int64_t {self.local(w)} = 0;" for w in self.extents]

    def check(self) -> list[str]:
        """Statements computing the extents; 32-bit overflow fails with ``TC_ERR_SHAPE``."""
        lines = [f"{self.local(w)} = {e};" for w, e in self.extents.items()]
        rows = f"tcg__mul({self.local('m')}, {self.local('batch')}, &err)"
        big = " || ".join(
            f"{v} > INT64_C(2147483647)" for v in (rows, self.local("n"), self.local("k"))
        )
        return [*lines, "if (err) goto defer;", f"if ({big}) goto defer;"]

    def call(self, a: str, b: str, out: str) -> str:
        """The statement running the GEMM on the pointers ``a``, ``b`` and ``out``."""
        ext = ", ".join(self.local(w) for w in ("batch", "m", "n", "k"))
        flags = f"{int(self.trans_a)}, {int(self.trans_b)}"
        batched = f"{int(self.a_batched)}, {int(self.b_batched)}"
        return f"tc__gemm({self.index}, {flags}, {ext}, {batched}, {a}, {b}, {out});"
