"""Identifiers of generated C and CUDA code: reserved names and how IR names are mangled.

A function or local variable named like a function the code calls (``expf``), or like a
declaration of an included header (``exp`` in ``math.h``), either fails to compile or shadows
the library function inside the kernel. Locals get a ``v_`` prefix (:class:`NameTable`),
exported functions a trailing underscore (:func:`symbol_of`, :func:`symbol_table`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

C_KEYWORDS = frozenset(
    ("auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
     "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
     "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
     "union", "unsigned", "void", "volatile", "while", "bool", "true", "false", "main", "NULL",
     "INFINITY", "NAN", "_Bool", "_Complex", "_Imaginary")
)  # fmt: skip
"""C keywords, plus ``main`` and the macros the emitted code spells out."""

_LIBM_FUNCTIONS = (
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "ceil", "copysign",
    "cos", "cosh", "drem", "erf", "erfc", "exp", "exp10", "exp2", "expm1", "fabs", "fdim",
    "finite", "floor", "fma", "fmax", "fmin", "fmod", "frexp", "gamma", "hypot", "ilogb", "j0",
    "j1", "jn", "ldexp", "lgamma", "llrint", "llround", "log", "log10", "log1p", "log2", "logb",
    "lrint", "lround", "modf", "nan", "nearbyint", "nextafter", "nexttoward", "pow", "pow10",
    "remainder", "remquo", "rint", "round", "scalb", "scalbln", "scalbn", "significand", "sin",
    "sincos", "sinh", "sqrt", "tan", "tanh", "tgamma", "trunc", "y0", "y1", "yn",
)  # fmt: skip
_LIBM_MACROS = (
    "fpclassify", "isfinite", "isgreater", "isgreaterequal", "isinf", "isless", "islessequal",
    "islessgreater", "isnan", "isnormal", "isunordered", "signbit", "HUGE_VAL", "HUGE_VALF",
    "HUGE_VALL", "FP_NAN", "FP_INFINITE", "FP_ZERO", "FP_SUBNORMAL", "FP_NORMAL", "M_E", "M_PI",
    "M_SQRT2", "M_LN2", "M_LN10", "M_LOG2E", "M_LOG10E",
)  # fmt: skip
LIBM_NAMES = frozenset(
    (*(f + suffix for f in _LIBM_FUNCTIONS for suffix in ("", "f", "l")), *_LIBM_MACROS)
)
"""``math.h``: every function in its double, ``float`` (``f``) and ``long double`` (``l``)
spelling, and its function-like and constant macros."""

LIBC_NAMES = frozenset(
    ("abs", "labs", "llabs", "div", "ldiv", "lldiv", "malloc", "calloc", "realloc", "free",
     "aligned_alloc", "abort", "exit", "atexit", "getenv", "system", "rand", "srand", "qsort",
     "bsearch", "atoi", "atol", "atoll", "atof", "strtol", "strtoll", "strtoul", "strtoull",
     "strtod", "strtof", "printf", "fprintf", "sprintf", "snprintf", "puts", "putchar", "fputs",
     "fopen", "fclose", "fflush", "stdin", "stdout", "stderr", "EOF", "FILE", "memcpy",
     "memmove", "memset", "memcmp", "strlen", "strcpy", "strncpy", "strcmp", "strncmp", "strcat",
     "size_t", "ptrdiff_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t",
     "uint32_t", "uint64_t", "intptr_t", "uintptr_t", "INT64_C", "UINT64_C", "offsetof",
     "errno", "assert")
)  # fmt: skip
"""Declarations and macros of the other headers the C unit includes."""

CUDA_NAMES = frozenset(
    ("class", "new", "delete", "template", "typename", "this", "namespace", "operator",
     "private", "public", "protected", "virtual", "try", "catch", "throw", "using", "friend",
     "explicit", "mutable", "export", "nullptr", "constexpr", "decltype", "static_cast",
     "dynamic_cast", "reinterpret_cast", "const_cast", "static_assert", "noexcept", "alignas",
     "alignof", "thread_local", "wchar_t", "char16_t", "char32_t", "and", "or", "not", "xor",
     "bitand", "bitor", "compl", "and_eq", "or_eq", "xor_eq", "not_eq", "asm", "concept",
     "requires", "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "dim3", "half",
     "nv_bfloat16", "float2", "float4", "int2", "int4", "rsqrt", "rsqrtf", "rcbrt", "rcbrtf",
     "sinpi", "sinpif", "cospi", "cospif", "normcdf", "normcdff", "erfinv", "erfinvf", "saturate",
     "min", "max", "umin", "umax", "llmin", "llmax", "fminf", "fmaxf")
)  # fmt: skip
"""C++ keywords, CUDA built-in variables and types, and CUDA math functions beyond libm."""

C_RESERVED = C_KEYWORDS | LIBM_NAMES | LIBC_NAMES
"""Names no identifier of a generated C unit may take."""

CUDA_RESERVED = C_RESERVED | CUDA_NAMES
"""Names no identifier of a generated CUDA unit may take."""


def _is_mangled(name: str, keywords: frozenset[str]) -> bool:
    """True when ``name`` may not be used as is: reserved, or in tilecraft's/the system's space."""
    return (
        name in keywords
        or name.startswith(("tc_", "__"))
        or (name[:1] == "_" and name[1:2].isupper())
    )


def _sanitize(hint: str) -> str:
    base = re.sub(r"\W", "_", hint) or "v"
    return "v_" + base if base[0].isdigit() else base


class NameTable:
    """Give IR objects (vars, buffers) distinct, valid C identifiers derived from their names.

    Parameters
    ----------
    reserved
        Identifiers that must not be handed out (e.g. the function's own symbol).
    keywords
        Names that are prefixed with ``v_`` (``exp`` becomes ``v_exp``); names starting with
        ``tc_`` (emitter helpers) or ``__`` are always prefixed.
    """

    def __init__(
        self, reserved: tuple[str, ...] = (), keywords: frozenset[str] = C_RESERVED
    ) -> None:
        self._by_id: dict[int, str] = {}
        self._used: set[str] = set(reserved)
        self._keywords = keywords
        self._keep: list[object] = []  # keep objects alive so their ids stay unique

    def get(self, obj: object, hint: str) -> str:
        """The identifier of ``obj``, creating it from ``hint`` on first use."""
        name = self._by_id.get(id(obj))
        if name is not None:
            return name
        base = _sanitize(hint)
        if _is_mangled(base, self._keywords):
            base = "v_" + base
        name, k = base, 1
        while name in self._used:
            name = f"{base}_{k}"
            k += 1
        self._used.add(name)
        self._by_id[id(obj)] = name
        self._keep.append(obj)
        return name

    def lookup(self, obj: object) -> str | None:
        """The identifier of ``obj`` if it has one."""
        return self._by_id.get(id(obj))


def symbol_of(name: str, keywords: frozenset[str] = C_RESERVED) -> str:
    """The symbol a function called ``name`` is emitted under, ignoring other functions.

    Reserved names get a trailing underscore (``main`` -> ``main_``, ``exp`` -> ``exp_``);
    names in tilecraft's or the system's space get an ``f_`` prefix.
    """
    base = _sanitize(name)
    if base in keywords:
        return base + "_"
    return "f_" + base if _is_mangled(base, keywords) else base


def symbol_table(names: Iterable[str], keywords: frozenset[str] = C_RESERVED) -> dict[str, str]:
    """Distinct symbols for the functions ``names`` of one unit (see :func:`symbol_of`).

    A name that is a valid symbol keeps it; a mangled name that collides with another
    function's symbol gets a numeric suffix.
    """
    names = list(names)
    out = {n: n for n in names if symbol_of(n, keywords) == n}
    used = set(out.values())
    for n in names:
        if n in out:
            continue
        base = symbol_of(n, keywords)
        sym, k = base, 1
        while sym in used:
            sym, k = f"{base}{k}", k + 1
        used.add(sym)
        out[n] = sym
    return {n: out[n] for n in names}
