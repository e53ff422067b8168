"""The printer of graph script (the form is described in :mod:`tilecraft.graph.script`)."""

from __future__ import annotations

import keyword
import math
import unicodedata
from typing import Any

from ..ir import Add, Attrs, Expr, FloorDiv, IntImm, IRModule, Mul, Sub, Var
from ..ir import dtype as to_dtype
from .ir import (
    CallExtern,
    CallFunc,
    CallTIR,
    Constant,
    Function,
    OpCall,
    TensorType,
    TensorVar,
)
from .ir_bind import BindSymbol

_IND = "    "
_BINOPS: dict[type[Expr], str] = {Add: "+", Sub: "-", Mul: "*", FloorDiv: "//"}


def _dim(e: Expr) -> str:
    if isinstance(e, IntImm):
        return str(e.value)
    return '"' + _dim_expr(e) + '"'


def _dim_expr(e: Expr) -> str:
    """Extent text: names, ints and parenthesized ``+ - * //`` (built without recursion).

    Other expressions (and shape variables that are not int32), which graph script cannot
    state, print in PrimFunc script form so that printing never fails.
    """
    from ..script.printer import to_script as prim_to_script

    out: list[str] = []
    stack: list[str | Expr] = [e]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, IntImm):
            out.append(str(item.value))
        elif isinstance(item, Var):
            out.append(item.name if item.dtype == to_dtype("int32") else prim_to_script(item))
        elif isinstance(item, (Add, Sub, Mul, FloorDiv)):
            stack.extend([")", item.b, f" {_BINOPS[type(item)]} ", item.a, "("])
        else:
            out.append(prim_to_script(item))
    return "".join(out)


def type_text(t: TensorType) -> str:
    """``R.Tensor((1, "n"), "float32")``."""
    dims = ", ".join(_dim(s) for s in t.shape) + ("," if t.ndim == 1 else "")
    return f'R.Tensor(({dims}), "{t.dtype}")'


def _lit(v: Any) -> str:
    if isinstance(v, Attrs):
        return "{" + ", ".join(f"{k!r}: {_lit(x)}" for k, x in v.items_tuple()) + "}"
    if isinstance(v, tuple):
        inner = ", ".join(_lit(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, float) and math.isinf(v):  # a literal ast.literal_eval reads back
        return "1e999" if v > 0 else "-1e999"
    return repr(v)


def function_lines(func: Function, name: str, in_module: bool) -> list[str]:
    """The script lines of graph function ``func`` (unindented)."""
    names: dict[int, str] = {}
    used = {"R", "T", "I", "cls"}

    def define(v: TensorVar) -> str:
        base, k = unicodedata.normalize("NFKC", v.name), 0  # the name Python reads back
        base = base if base.isidentifier() else "v"
        cand = base
        while cand in used or keyword.iskeyword(cand):
            k += 1
            cand = f"{base}_{k}"
        used.add(cand)
        names[id(v)] = cand
        return cand

    params = ", ".join(f"{define(p)}: {type_text(p.type)}" for p in func.params)
    if func.returns_tuple:
        ret_text = f"R.Tuple({', '.join(type_text(t) for t in func.ret_types)})"
    else:
        ret_text = type_text(func.rets[0].type)
    lines = ["@R.function", f"def {name}({params}) -> {ret_text}:"]
    if func.attrs:
        lines.append(_IND + f"R.func_attr({_lit(func.attrs)})")
    if in_module and any(isinstance(b.value, (CallTIR, CallFunc)) for b in func.bindings):
        lines.append(_IND + "cls = Module")
    if func.bindings:
        lines.append(_IND + "with R.dataflow():")
        for b in func.bindings:
            args = [names[id(a)] for a in b.value.args]
            lhs = define(b.var)
            if isinstance(b.value, CallFunc):  # a graph function's call states its type
                lhs += f": {type_text(b.var.type)}"
            lines.append(_IND * 2 + f"{lhs} = {_value_text(b.value, args, in_module)}")
        lines.append(_IND * 2 + f"R.output({', '.join(names[id(r)] for r in func.rets)})")
    lines.append(_IND + f"return {_ret_text([names[id(r)] for r in func.rets], func)}")
    return lines


def _ret_text(names: list[str], func: Function) -> str:
    """``a``, ``a, b`` or ``(a,)`` (a tuple of one result)."""
    if not func.returns_tuple:
        return names[0]
    return f"({names[0]},)" if len(names) == 1 else ", ".join(names)


def _value_text(
    v: OpCall | CallTIR | CallExtern | CallFunc | Constant | BindSymbol,
    args: list[str],
    in_module: bool,
) -> str:
    tup = "(" + ", ".join(args) + ("," if len(args) == 1 else "") + ")"
    if isinstance(v, BindSymbol):  # its type, (symbol, 0), is implied
        lo, hi = (str(e) if isinstance(e, int) else _dim(e) for e in (v.lower, v.upper))
        return f'R.bind_symbol({args[0]}, "{_dim_expr(v.symbol)}", lower={lo}, upper={hi})'
    if isinstance(v, CallExtern):  # the routine is a library's, named by a string
        extra = "".join(f", {k}={_lit(x)}" for k, x in v.attrs.items_tuple())
        return f"R.call_extern({v.func!r}, {tup}, out_sinfo={type_text(v.out_type)}{extra})"
    if isinstance(v, Constant):  # exact values: base64 of the little-endian bytes
        return f'R.const({type_text(v.type)}, "{v.payload}")'
    if isinstance(v, OpCall):
        kw = [f"{k}={_lit(x)}" for k, x in v.attrs.items_tuple()]
        return f"R.{v.op}({', '.join(args + kw)})"
    callee = f"cls.{v.func}" if in_module else repr(v.func)
    if isinstance(v, CallTIR):
        return f"R.call_tir({callee}, {tup}, out_sinfo={type_text(v.out_type)})"
    return (
        f"{callee}({', '.join(args)})"
        if in_module
        else f"R.call_func({', '.join([callee, *args])})"
    )


def to_script(node: Function | IRModule) -> str:
    """Script text of a graph function or of a module (PrimFuncs via the PrimFunc printer)."""
    if isinstance(node, Function):
        return "\n".join(function_lines(node, node.name, False))
    from ..script.printer import to_script as prim_to_script

    lines = ["@T.ir_module", "class Module:"]
    if node.attrs:
        lines.append(_IND + f"T.module_attr({_lit(node.attrs)})")
    for name, f in node.items():
        if len(lines) > 2:
            lines.append("")
        if isinstance(f, Function):
            body = function_lines(f, name, True)
        else:
            body = prim_to_script(f.update(name=name)).splitlines()
        lines.extend(_IND + ln if ln else ln for ln in body)
    if len(lines) == 2:
        lines.append(_IND + "pass")
    return "\n".join(lines)


# parsing --------------------------------------------------------------------------------
