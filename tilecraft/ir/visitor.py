"""Generic traversal of IR trees: a read-only :class:`Visitor` and a rebuilding :class:`Mutator`.

Both dispatch on the node's class name, falling back to its base classes: define
``visit_For(self, node)`` to handle loops and call ``self.generic_visit(node)`` to recurse into
the children. Children are found from the
dataclass fields (nodes, tuples of nodes); enum, string and attribute fields are leaves.

A :class:`Mutator` rebuilds a node only when a child changed (``node.update``), and maps each
buffer to one replacement for the whole traversal, so buffer identity survives rewriting.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .buffer import Buffer
from .expr import Expr, Var
from .module import IRModule
from .node import Attrs, Node

_FIELDS: dict[type, tuple[str, ...]] = {}


def node_fields(cls: type) -> tuple[str, ...]:
    """Names of the dataclass fields of ``cls`` that are set at construction."""
    names = _FIELDS.get(cls)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(cls) if f.init)
        _FIELDS[cls] = names
    return names


# field annotations that never hold a node: traversals skip those fields
_LEAF_TYPES = frozenset(
    {"str", "str | None", "int", "float", "bool", "DataType", "ForKind", "IterKind"}
)
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def child_fields(cls: type) -> tuple[str, ...]:
    """The :func:`node_fields` of ``cls`` that may hold a node or a tuple of nodes."""
    names = _CHILD_FIELDS.get(cls)
    if names is None:
        names = tuple(
            f.name for f in dataclasses.fields(cls) if f.init and str(f.type) not in _LEAF_TYPES
        )
        _CHILD_FIELDS[cls] = names
    return names


def iter_children(node: Node) -> Iterator[Node]:
    """Direct child nodes of ``node`` in field order (modules: their functions)."""
    if isinstance(node, IRModule):
        yield from node.functions.values()
        return
    for name in child_fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, Node):
            yield value
        elif isinstance(value, tuple):
            for item in value:
                if isinstance(item, Node):
                    yield item


# (visitor class, node class) -> the unbound method handling it: traversals are made per call
# (a substitution, a buffer rewrite), so each would otherwise search the classes again
_METHODS: dict[tuple[type, type], Callable[..., Any]] = {}


def _lookup(obj: object, cls: type, default: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``visit_<Name>`` for ``cls`` or its nearest base class that has one (else ``default``,
    a bound method of ``obj``), bound to ``obj``."""
    key = (type(obj), cls)
    fn = _METHODS.get(key)
    if fn is None:
        owner = type(obj)
        for base in cls.__mro__:
            fn = getattr(owner, "visit_" + base.__name__, None)
            if fn is not None:
                break
        else:
            fn = getattr(owner, default.__name__)
        _METHODS[key] = fn
    return fn.__get__(obj)  # type: ignore[no-any-return]


class Visitor:
    """Read-only traversal; override ``visit_<ClassName>`` methods."""

    def __init__(self) -> None:
        self._dispatch: dict[type, Callable[[Any], None]] = {}

    def visit(self, node: Node) -> None:
        """Visit ``node`` with its ``visit_<ClassName>`` method or :meth:`generic_visit`."""
        cls = type(node)
        fn = self._dispatch.get(cls)
        if fn is None:
            fn = _lookup(self, cls, self.generic_visit)
            self._dispatch[cls] = fn
        fn(node)

    def generic_visit(self, node: Node) -> None:
        """Visit every child of ``node``."""
        for child in iter_children(node):
            self.visit(child)


class Mutator:
    """Rebuilding traversal; ``visit_<ClassName>`` methods return the replacement node."""

    def __init__(self) -> None:
        self._dispatch: dict[type, Callable[[Any], Any]] = {}
        self.buffer_map: dict[int, Buffer] = {}

    def visit(self, node: Any) -> Any:
        """Return the replacement of ``node`` (``node`` itself when unchanged)."""
        cls = type(node)
        fn = self._dispatch.get(cls)
        if fn is None:
            fn = _lookup(self, cls, self.generic_visit)
            self._dispatch[cls] = fn
        return fn(node)

    def visit_Buffer(self, buf: Buffer) -> Buffer:  # noqa: N802
        """Rewrite a buffer's shape once per traversal; later uses get the same object."""
        done = self.buffer_map.get(id(buf))
        if done is not None:
            return done
        new = self.generic_visit(buf)
        self.buffer_map[id(buf)] = new
        return new  # type: ignore[no-any-return]

    def generic_visit(self, node: Any) -> Any:
        """Rebuild ``node`` from its visited children; return it unchanged if none changed."""
        if isinstance(node, IRModule):
            funcs = {k: self.visit(f) for k, f in node.functions.items()}
            changed = any(funcs[k] is not f for k, f in node.functions.items())
            return IRModule(funcs, node.attrs) if changed else node
        changes: dict[str, Any] = {}
        for name in child_fields(type(node)):
            value = getattr(node, name)
            if isinstance(value, Node):
                new = self.visit(value)
                if new is not value:
                    changes[name] = new
            elif isinstance(value, tuple) and value and not isinstance(value, Attrs):
                items = tuple(self.visit(v) if isinstance(v, Node) else v for v in value)
                if any(a is not b for a, b in zip(items, value, strict=True)):
                    changes[name] = items
        return node.update(**changes) if changes else node


def post_order_visit(node: Node, fn: Callable[[Node], None]) -> None:
    """Call ``fn`` on every node under ``node`` (children first), each buffer once.

    The walk keeps its own stack, so trees of any depth are visited (no recursion limit).
    """
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        n, expanded = stack.pop()
        if expanded:
            fn(n)
            continue
        if isinstance(n, Buffer):
            if id(n) in seen:
                continue
            seen.add(id(n))
        stack.append((n, True))
        stack.extend((c, False) for c in reversed(list(iter_children(n))))


def walk(node: Node, *, prune: Callable[[Node], bool] | None = None) -> Iterator[Node]:
    """Every node under ``node``, itself first, in pre-order (a parent before its children,
    children in field order); each buffer once.

    The walk keeps its own stack, so trees of any depth are walked (no recursion limit), and
    it is lazy: stop iterating to stop the walk.

    Parameters
    ----------
    node
        The root: a statement, expression, function or module.
    prune
        Called on each node yielded; when it returns True the node's children are not
        walked (``prune=lambda n: not isinstance(n, Stmt)`` walks the statements only,
        without descending into their expressions and buffers).

    Yields
    ------
    Node
        The nodes, pre-order.

    Examples
    --------
    >>> loops = [n for n in walk(func.body) if isinstance(n, For)]
    """
    seen: set[int] = set()
    stack: list[Node] = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Buffer):
            if id(n) in seen:
                continue
            seen.add(id(n))
        yield n
        if prune is None or not prune(n):
            stack.extend(reversed(list(iter_children(n))))


class _Substitute(Mutator):
    def __init__(self, vmap: Mapping[Var, Expr]) -> None:
        super().__init__()
        self.vmap = {id(k): v for k, v in vmap.items()}

    def visit_Var(self, var: Var) -> Expr:  # noqa: N802
        return self.vmap.get(id(var), var)


def substitute(node: Any, vmap: Mapping[Var, Expr]) -> Any:
    """Replace every use of the variables in ``vmap`` inside ``node``."""
    if not vmap:
        return node
    return _Substitute(vmap).visit(node)


def collect_vars(node: Node) -> list[Var]:
    """Distinct variables used under ``node``, in order of first appearance (post-order)."""
    found: dict[int, Var] = {}

    def fn(n: Node) -> None:
        if isinstance(n, Var) and id(n) not in found:
            found[id(n)] = n

    post_order_visit(node, fn)
    return list(found.values())


def uses_var(node: Node, var: Var) -> bool:
    """True if ``var`` occurs under ``node``."""
    return any(v is var for v in collect_vars(node))
