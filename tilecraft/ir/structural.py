"""Structural equality and a stable structural hash of IR, up to renaming (alpha-equivalence).

Two trees are *structurally equal* when they have the same node classes, the same constants,
dtypes, shapes, scopes, loop kinds, thread tags, annotations and block names, and their
variables and buffers correspond one to one. Names of variables and buffers (and
``PrimFunc.name``) are ignored.

Variables and buffers ("bindable" nodes) are matched where they are *defined*: PrimFunc
params, ``For.loop_var``, ``LetStmt.var``, ``IterVar.var``, ``Block.alloc_buffers`` and
``Allocate.buffer``; a Var standing directly as an extent of a defined buffer's shape is
defined there at its first appearance. A function's signature (``PrimFunc.params``) defines
*every* variable in it at its first appearance, however deep: a scalar parameter that a
buffer's shape uses before the parameter itself (``A: T.Buffer((n * 2,)), n: T.int32``) is
matched there, so equality does not depend on parameter order. A definition of a node
already matched must agree with that match. A bindable
first met in a use position is *free*: it must be the same object on both sides, unless
``map_free_vars=True`` (then free nodes are matched by order of first appearance). A Buffer
passed directly to :func:`structural_equal` is compared as a definition; a Var is a use.

The structural hash encodes the tree in the same traversal order, numbering bindable nodes
by first appearance instead of naming them, and returns the first 32 hex characters (128
bits) of the SHA-256 of that encoding. Floats are encoded with ``float.hex``, strings with
JSON escaping; nothing depends on ``hash()``/``id()`` values, so the digest is the same across
processes, ``PYTHONHASHSEED`` values, Python versions and machines. Structurally equal trees
hash equal. The digest changes if a registered node class gains or loses fields.

Registering a node class
------------------------
Both functions (and :mod:`tilecraft.ir.serialize`) walk nodes generically over their
dataclass fields, driven by a small registry. A later layer adds a node class with::

    register_node(MyBinding, defines=("var",))   # fields defined before the others
    register_node(MyVar, binds=True, ignore=("name",))  # matched by definition, name ignored
    register_node(MyFunc, defines=("params",), closes=("params",))  # a signature

Non-dataclass nodes pass ``fields=`` (attribute names) and ``build=`` (a callable taking the
fields as keyword arguments). Enum types used in fields are registered with
:func:`register_enum` so JSON can rebuild them. Field values may be nodes, tuples, mappings
(``Attrs`` or ``dict`` with string keys), DataTypes, enums, bools, ints, floats, strings or None.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import IRError
from .buffer import Buffer
from .dtype import DataType
from .expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BufferLoad,
    Call,
    Cast,
    Div,
    Expr,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    Not,
    Or,
    Range,
    Select,
    Sub,
    Var,
)
from .function import PrimFunc
from .module import IRModule
from .node import Node
from .stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferRegion,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    IterKind,
    IterVar,
    LetStmt,
    SeqStmt,
)
from .visitor import node_fields

HASH_HEX_CHARS = 32
"""Length of :func:`structural_hash` digests (hex characters of a SHA-256)."""

_HASH_FORMAT = "tilecraft-structural-hash-v1"


# registry -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class NodeSpec:
    """How the generic walkers treat one node class.

    Attributes
    ----------
    cls
        The node class (matched exactly, not by subclass).
    tag
        Stable name used in JSON documents and in the hash encoding.
    fields
        Every field, in order; JSON stores all of them.
    defines
        Fields holding definitions (bindable nodes, or tuples of them); they are visited
        before the other fields.
    ignore
        Fields ignored by equality and hash (names).
    closes
        Fields forming a signature: every bindable node inside them, at any depth, is a
        definition.
    binds
        Instances are variables or buffers, matched by definition rather than by name.
    build
        Rebuilds an instance from its fields given as keyword arguments.
    order
        ``(field, is_definition)`` pairs in visiting order, ignored fields left out.
    """

    cls: type
    tag: str
    fields: tuple[str, ...]
    defines: tuple[str, ...]
    ignore: tuple[str, ...]
    binds: bool
    build: Callable[..., Any]
    order: tuple[tuple[str, bool], ...]
    closes: tuple[str, ...] = ()


_SPECS: dict[type, NodeSpec] = {}
_TAGS: dict[str, NodeSpec] = {}
_ENUMS: dict[str, type[enum.Enum]] = {}


def register_node(
    cls: type,
    *,
    defines: tuple[str, ...] = (),
    ignore: tuple[str, ...] = (),
    binds: bool = False,
    tag: str | None = None,
    fields: tuple[str, ...] | None = None,
    build: Callable[..., Any] | None = None,
    closes: tuple[str, ...] = (),
) -> type:
    """Register ``cls`` with structural equality, hashing and JSON serialisation.

    Parameters
    ----------
    cls
        A node class; a dataclass unless ``fields`` and ``build`` are given.
    defines
        Fields whose bindable nodes are definitions, visited first.
    ignore
        Fields left out of equality and hash (JSON still stores them).
    binds
        True for variable- or buffer-like classes matched by definition.
    tag
        Name in JSON and in the hash encoding; defaults to ``cls.__name__``.
    fields
        Field names; defaults to the dataclass's init fields.
    build
        Constructor from keyword fields; defaults to ``cls``.
    closes
        Signature fields (a subset of ``defines``): every bindable node inside them, at any
        depth, is a definition.

    Returns
    -------
    type
        ``cls`` itself, so the call may be used where a class is expected.
    """
    name = tag or cls.__name__
    names = fields if fields is not None else node_fields(cls)
    _check_registration(cls, name, names, (*defines, *ignore, *closes))
    order = tuple((f, True) for f in defines) + tuple(
        (f, False) for f in names if f not in defines and f not in ignore
    )
    spec = NodeSpec(cls, name, tuple(names), tuple(defines), tuple(ignore), binds,
                    build or cls, order, tuple(closes))  # fmt: skip
    _SPECS[cls] = spec
    _TAGS[name] = spec
    return cls


def _check_registration(
    cls: type, name: str, names: tuple[str, ...], mentioned: tuple[str, ...]
) -> None:
    if not name or any(c.isspace() for c in name):
        raise IRError(f"register_node: tag must be non-empty without whitespace, got {name!r}")
    unknown = sorted(set(mentioned) - set(names))
    if unknown:
        raise IRError(f"register_node {name}: unknown fields {unknown}; fields are {list(names)}")
    other = _TAGS.get(name)
    if other is not None and other.cls is not cls:
        raise IRError(f"register_node: tag {name!r} is already used by {other.cls.__qualname__}")


def register_enum(cls: type[enum.Enum]) -> type[enum.Enum]:
    """Register an enum type used in node fields, so JSON documents can name it."""
    other = _ENUMS.get(cls.__name__)
    if other is not None and other is not cls:
        raise IRError(f"register_enum: name {cls.__name__!r} is already used")
    _ENUMS[cls.__name__] = cls
    return cls


def node_spec(cls: type) -> NodeSpec:
    """The registered :class:`NodeSpec` of ``cls``; IRError when it is not registered."""
    spec = _SPECS.get(cls)
    if spec is None:
        raise IRError(
            f"{cls.__qualname__} is not a registered IR node class; call "
            "tilecraft.ir.structural.register_node on it"
        )
    return spec


def spec_by_tag(tag: str) -> NodeSpec | None:
    """The spec registered under ``tag`` (None when unknown)."""
    return _TAGS.get(tag)


def enum_by_name(name: str) -> type[enum.Enum] | None:
    """The enum type registered under ``name`` (None when unknown)."""
    return _ENUMS.get(name)


def registered_classes() -> tuple[type, ...]:
    """Every registered node class."""
    return tuple(_SPECS)


for _cls in (IntImm, FloatImm, Add, Sub, Mul, Div, FloorDiv, FloorMod, Min, Max, EQ, NE, LT,
             LE, GT, GE, And, Or, Not, Select, Cast, Call, BufferLoad, Range, BufferStore,
             SeqStmt, IfThenElse, Evaluate, BufferRegion, BlockRealize):  # fmt: skip
    register_node(_cls)
register_node(Var, binds=True, ignore=("name",))
register_node(Buffer, binds=True, ignore=("name",), defines=("shape",))
register_node(For, defines=("loop_var",))
register_node(LetStmt, defines=("var",))
register_node(Allocate, defines=("buffer",))
register_node(IterVar, defines=("var",))
register_node(Block, defines=("alloc_buffers",))
register_node(PrimFunc, defines=("params",), ignore=("name",), closes=("params",))
register_node(IRModule, fields=("functions", "attrs"), build=IRModule)
register_enum(ForKind)
register_enum(IterKind)


# equality -----------------------------------------------------------------------------------
_Path = tuple[Any, "str | int"] | None


def _render_path(path: _Path) -> str:
    parts: list[str | int] = []
    while path is not None:
        path, comp = path
        parts.append(comp)
    out = ""
    for comp in reversed(parts):
        if isinstance(comp, int):
            out += f"[{comp}]"
        elif comp.startswith("["):
            out += comp
        else:
            out += ("." if out else "") + comp
    return out or "<root>"


def _name(value: Any) -> str:
    return repr(getattr(value, "name", "?"))


def _show(value: Any) -> str:
    if isinstance(value, Node):
        spec = _SPECS.get(type(value))
        if spec is not None and spec.binds:
            return f"{type(value).__name__} {_name(value)}"
        return type(value).__name__
    return repr(value)


@dataclass
class _Mismatch:
    path: _Path
    reason: str
    a: Any
    b: Any

    def message(self) -> str:
        return f"{_render_path(self.path)}: {self.reason}"


class _Equal:
    """One comparison: the bijection between bindable nodes of ``a`` and ``b``."""

    def __init__(self, map_free_vars: bool) -> None:
        self.map_free = map_free_vars
        self.fwd: dict[int, Any] = {}
        self.rev: dict[int, Any] = {}

    def run(self, a: Any, b: Any) -> _Mismatch | None:
        root_def = isinstance(a, Node) and not isinstance(a, Expr)
        # (lhs, rhs, is a definition, inside a signature, path)
        stack: list[tuple[Any, Any, bool, bool, _Path]] = [(a, b, root_def, False, None)]
        while stack:
            x, y, is_def, sig, path = stack.pop()
            if type(x) is not type(y):
                return _Mismatch(path, f"{_show(x)} != {_show(y)}", x, y)
            if isinstance(x, Node):
                spec = node_spec(type(x))
                if spec.binds:
                    fresh, bad = self._bind(x, y, is_def or sig)
                    if bad:
                        return _Mismatch(path, bad, x, y)
                    if not fresh:  # matched before; its fields were compared then
                        continue
                for name, fdef in reversed(spec.order):
                    inner = sig or name in spec.closes
                    stack.append((getattr(x, name), getattr(y, name), fdef, inner, (path, name)))
            elif isinstance(x, tuple):
                if len(x) != len(y):
                    return _Mismatch(path, f"length {len(x)} != {len(y)}", x, y)
                for i in range(len(x) - 1, -1, -1):
                    stack.append((x[i], y[i], is_def, sig, (path, i)))
            elif isinstance(x, Mapping):
                kx, ky = sorted(x), sorted(y)
                if kx != ky:
                    return _Mismatch(path, f"keys {kx} != {ky}", x, y)
                for k in reversed(kx):
                    stack.append((x[k], y[k], False, sig, (path, f"[{k!r}]")))
            elif isinstance(x, float):
                if x.hex() != y.hex():
                    return _Mismatch(path, f"{x!r} != {y!r}", x, y)
            elif isinstance(x, (bool, int, str, DataType, enum.Enum)) or x is None:
                if x != y:
                    return _Mismatch(path, f"{_show(x)} != {_show(y)}", x, y)
            else:
                raise IRError(f"structural_equal: cannot compare a {type(x).__name__} value")
        return None

    def _bind(self, x: Any, y: Any, is_def: bool) -> tuple[bool, str]:
        """Match bindable ``x`` with ``y``: (newly matched, error message or "")."""
        fx, ry = self.fwd.get(id(x)), self.rev.get(id(y))
        if fx is not None or ry is not None:
            if fx is y and ry is x:
                return False, ""
            kind = type(x).__name__
            if fx is None:
                return False, f"{kind} {_name(x)} is new here but {_name(y)} matches {_name(ry)}"
            return False, f"{kind} {_name(x)} matches {_name(fx)} elsewhere, not {_name(y)}"
        if not is_def and not self.map_free and x is not y:
            return False, (
                f"free {type(x).__name__}s {_name(x)} and {_name(y)} differ (free variables "
                "compare by identity; pass map_free_vars=True to match them by position)"
            )
        self.fwd[id(x)] = y
        self.rev[id(y)] = x
        return True, ""


def structural_equal(a: object, b: object, map_free_vars: bool = False) -> bool:
    """True when ``a`` and ``b`` are the same IR up to renaming of variables and buffers.

    Parameters
    ----------
    a, b
        Nodes of any registered kind (expressions, statements, buffers, ranges, functions,
        modules), ``Attrs``, or tuples of those.
    map_free_vars
        Match variables and buffers that are used without a definition by order of first
        appearance instead of requiring them to be the same objects.

    Returns
    -------
    bool
        Whether the two are alpha-equivalent (see the module docstring for the rules).
    """
    return _Equal(map_free_vars).run(a, b) is None


def assert_structural_equal(a: object, b: object, map_free_vars: bool = False) -> None:
    """Raise AssertionError naming the first mismatch unless ``a`` and ``b`` are equal.

    The message starts with the path of the first difference in traversal order, for example
    ``body.block.body.stmts[1].value.b.value: 2 != 3``, followed by the two differing parts.
    """
    bad = _Equal(map_free_vars).run(a, b)
    if bad is None:
        return
    lines = [f"IR differs at {bad.message()}"]
    for side, val in (("lhs", bad.a), ("rhs", bad.b)):
        if isinstance(val, Node):
            text = repr(val)
            lines.append(f"  {side}: " + (text if len(text) < 600 else text[:600] + " ..."))
    raise AssertionError("\n".join(lines))


# hashing ------------------------------------------------------------------------------------
def _encode(root: object) -> list[str]:
    """Canonical token stream of ``root``: preorder, bindable nodes numbered on first use."""
    out: list[str] = [_HASH_FORMAT]
    seen: dict[int, int] = {}
    stack: list[Any] = [root]
    while stack:
        v = stack.pop()
        if isinstance(v, Node):
            spec = node_spec(type(v))
            if spec.binds:
                n = seen.get(id(v))
                if n is not None:
                    out.append(f"@{n}")
                    continue
                seen[id(v)] = len(seen)
            out.append("n" + spec.tag)
            for name, _ in reversed(spec.order):
                stack.append(getattr(v, name))
        elif isinstance(v, tuple):
            out.append(f"({len(v)}")
            stack.extend(reversed(v))
        elif isinstance(v, Mapping):
            keys = sorted(v)
            out.append("m" + json.dumps(keys))
            stack.extend(v[k] for k in reversed(keys))
        elif isinstance(v, bool):
            out.append("T" if v else "F")
        elif isinstance(v, int):
            out.append(f"i{v}")
        elif isinstance(v, float):
            out.append("f" + v.hex())
        elif isinstance(v, str):
            out.append("s" + json.dumps(v))
        elif isinstance(v, DataType):
            out.append(f"d{v}")
        elif isinstance(v, enum.Enum):
            out.append(f"e{type(v).__name__}.{v.name}")
        elif v is None:
            out.append("N")
        else:
            raise IRError(f"structural_hash: cannot hash a {type(v).__name__} value")
    return out


def structural_hash(node: object, map_free_vars: bool = False) -> str:
    """A hex digest of ``node``'s structure, stable across processes and machines.

    Parameters
    ----------
    node
        Any registered node (or ``Attrs``, or a tuple of nodes).
    map_free_vars
        Accepted for symmetry with :func:`structural_equal`; free variables are always
        numbered by first appearance, so the digest is the same either way.

    Returns
    -------
    str
        32 lowercase hex characters (the first 128 bits of a SHA-256). Alpha-equivalent nodes
        give equal digests.
    """
    del map_free_vars  # numbering by first appearance already covers both modes
    data = "\n".join(_encode(node)).encode("utf-8")
    return hashlib.sha256(data).hexdigest()[:HASH_HEX_CHARS]
