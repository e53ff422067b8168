"""JSON round trip of IR nodes, safe on untrusted input.

Document layout (format ``"tilecraft.ir"``, version 1)::

    {"format": "tilecraft.ir", "version": 1,
     "nodes": [["Var", {"name": "i", "dtype": {"dtype": "int32"}}],
               ["IntImm", {"dtype": {"dtype": "int32"}, "value": 0}], ...],
     "root": {"ref": 12}}

``nodes`` is a table in post-order: every distinct node object appears once, as
``[tag, {field: value}]``, and may refer only to entries *before* it, so a shared Var or
Buffer comes back as one object and a document cannot describe a cycle. Field values are
encoded as: node -> ``{"ref": k}``; tuple -> list; ``Attrs`` -> ``{"attrs": {...}}``; other
mappings -> ``{"map": {...}}``; DataType -> ``{"dtype": "float32"}``; enum ->
``{"enum": "ForKind", "value": "serial"}``; float -> ``{"float": float.hex(x)}`` (exact, NaN
and infinities included); bool, int, str and None as themselves.

Decoding looks node classes up in the registry of :mod:`tilecraft.ir.structural` (so classes
registered there by later layers round-trip too), never imports or evaluates anything, and
turns every problem into a :class:`SerializeError` naming the table entry and field. A field
declared as a tuple must be given as a list (a node where a list belongs is rejected: a
Buffer, which is subscriptable, would otherwise be iterated without end).

Limits, checked by both :func:`to_json` and :func:`from_json` so that every document one
writes the other reads, and everything read prints:

- :data:`MAX_DOCUMENT_CHARS` characters of JSON text;
- :data:`MAX_DEPTH` nodes on the longest path from the root (expressions included);
- :data:`MAX_STMT_DEPTH` statements on the longest path (nested loops, blocks, lets, ...);
- :data:`MAX_TREE_NODES` nodes in the tree the table describes once shared entries are
  expanded (a table of 100 entries each referring twice to the one before describes 2^100
  nodes; printing, hashing and comparing walk that tree);
- field values (lists, attribute maps) nested at most 64 deep.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping
from typing import Any

from ..errors import IRError
from .dtype import DataType, dtype
from .function import PrimFunc
from .module import IRModule
from .node import Attrs, Node
from .stmt import Stmt
from .structural import NodeSpec, enum_by_name, node_spec, spec_by_tag
from .verify import verify as verify_ir

FORMAT = "tilecraft.ir"
VERSION = 1
_MAX_VALUE_DEPTH = 64
MAX_DOCUMENT_CHARS = 256 * 1024 * 1024
"""The longest JSON text :func:`from_json` reads."""
MAX_DEPTH = 10_000
"""The most nodes on one path from the root of a document's tree."""
MAX_STMT_DEPTH = 1_000
"""The most statements on one path from the root of a document's tree."""
MAX_TREE_NODES = 4_000_000
"""The most nodes a document's tree may hold with shared entries expanded."""


class SerializeError(IRError):
    """A JSON document does not describe valid IR."""


class _Extent:
    """Depth, statement depth and expanded size of table entries, filled children first."""

    def __init__(self) -> None:
        self.depth: list[int] = []
        self.stmts: list[int] = []
        self.size: list[int] = []

    def add(self, node: Node, kids: list[int], where: str) -> None:
        """Measure ``node`` whose children are the entries ``kids`` (repeats counted)."""
        depth = 1 + max((self.depth[k] for k in kids), default=0)
        stmts = int(isinstance(node, Stmt)) + max((self.stmts[k] for k in kids), default=0)
        size = 1 + sum(self.size[k] for k in kids)
        _check_extent(depth, stmts, size, where)
        self.depth.append(depth)
        self.stmts.append(stmts)
        self.size.append(size)

    def check_root(self, kids: list[int], where: str) -> None:
        """The value at the root holds the entries ``kids``."""
        depth = max((self.depth[k] for k in kids), default=0)
        stmts = max((self.stmts[k] for k in kids), default=0)
        _check_extent(depth, stmts, sum(self.size[k] for k in kids), where)


def _check_extent(depth: int, stmts: int, size: int, where: str) -> None:
    if depth > MAX_DEPTH:
        raise SerializeError(f"{where}: the tree is more than {MAX_DEPTH} nodes deep")
    if stmts > MAX_STMT_DEPTH:
        raise SerializeError(f"{where}: statements nest more than {MAX_STMT_DEPTH} deep")
    if size > MAX_TREE_NODES:
        raise SerializeError(
            f"{where}: the tree holds more than {MAX_TREE_NODES} nodes once shared entries "
            "are expanded"
        )


_TUPLE_FIELDS: dict[type, frozenset[str]] = {}


def _tuple_fields(cls: type) -> frozenset[str]:
    """Fields of ``cls`` declared as tuples (they must be given as JSON lists)."""
    found = _TUPLE_FIELDS.get(cls)
    if found is None:
        names = set()
        if dataclasses.is_dataclass(cls):
            for f in dataclasses.fields(cls):
                text = f.type if isinstance(f.type, str) else repr(f.type)
                if text.removeprefix("typing.").lower().startswith("tuple["):
                    names.add(f.name)
        found = _TUPLE_FIELDS[cls] = frozenset(names)
    return found


# encoding -----------------------------------------------------------------------------------
def _children(value: Any, out: list[Node]) -> None:
    """Append the nodes directly held by a field value (through tuples and mappings)."""
    if isinstance(value, Node):
        out.append(value)
    elif isinstance(value, tuple):
        for v in value:
            _children(v, out)
    elif isinstance(value, Mapping):
        for v in value.values():
            _children(v, out)


def _post_order(root: object) -> list[Node]:
    """Distinct nodes under ``root``, children before parents, in field order."""
    order: list[Node] = []
    done: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in done:
            continue
        if expanded:
            done.add(id(node))
            order.append(node)
            continue
        kids: list[Node] = []
        if isinstance(node, Node):
            spec = node_spec(type(node))
            stack.append((node, True))
            for name in spec.fields:
                _children(getattr(node, name), kids)
        else:
            _children(node, kids)
        stack.extend((k, False) for k in reversed(kids) if id(k) not in done)
    return order


def _encode_value(value: Any, index: Mapping[int, int]) -> Any:
    if isinstance(value, Node):
        return {"ref": index[id(value)]}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return {"float": value.hex()}
    if isinstance(value, tuple):
        return [_encode_value(v, index) for v in value]
    if isinstance(value, DataType):
        return {"dtype": str(value)}
    if isinstance(value, enum.Enum):
        if enum_by_name(type(value).__name__) is not type(value):
            raise IRError(f"to_json: enum {type(value).__name__} is not registered")
        return {"enum": type(value).__name__, "value": value.value}
    if isinstance(value, Attrs):
        return {"attrs": {k: _encode_value(v, index) for k, v in value.items_tuple()}}
    if isinstance(value, Mapping):
        for k in value:
            if not isinstance(k, str):
                raise IRError(f"to_json: mapping keys must be strings, got {k!r}")
        return {"map": {k: _encode_value(v, index) for k, v in value.items()}}
    raise IRError(f"to_json: cannot serialise a {type(value).__name__} value")


def to_json(node: object, indent: int | None = None) -> str:
    """Serialise ``node`` (any registered node, ``Attrs``, or a tuple of those) to JSON.

    Parameters
    ----------
    node
        The value to write.
    indent
        Passed to :func:`json.dumps` for a readable layout; the default is compact.

    Returns
    -------
    str
        A document that :func:`from_json` turns back into an identical structure, sharing
        preserved.

    Raises
    ------
    IRError
        For unregistered node classes or values, and (as :class:`SerializeError`) for IR
        beyond the documented limits, which :func:`from_json` would refuse.
    """
    nodes = _post_order(node)
    index = {id(n): i for i, n in enumerate(nodes)}
    table = []
    extent = _Extent()
    for n in nodes:
        spec = node_spec(type(n))
        fields = {name: _encode_value(getattr(n, name), index) for name in spec.fields}
        table.append([spec.tag, fields])
        kids: list[Node] = []
        for name in spec.fields:
            _children(getattr(n, name), kids)
        extent.add(n, [index[id(k)] for k in kids], f"to_json: {spec.tag}")
    root_kids: list[Node] = []
    _children(node, root_kids)
    extent.check_root([index[id(k)] for k in root_kids], "to_json")
    doc = {"format": FORMAT, "version": VERSION, "nodes": table,
           "root": _encode_value(node, index)}  # fmt: skip
    return json.dumps(doc, indent=indent, ensure_ascii=True, allow_nan=False)


# decoding -----------------------------------------------------------------------------------
def _reject_constant(name: str) -> Any:
    raise SerializeError(f"from_json: bare {name} is not allowed; write floats as {{'float': hex}}")


_TAGGED = ("ref", "float", "dtype", "enum", "attrs", "map")


class _Decoder:
    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.refs: list[int] = []  # entries referred to by the value being decoded
        self.extent = _Extent()

    def value(self, raw: Any, where: str, depth: int = 0) -> Any:
        if depth > _MAX_VALUE_DEPTH:
            raise SerializeError(f"{where}: values nested more than {_MAX_VALUE_DEPTH} deep")
        if raw is None or isinstance(raw, (bool, int, str, float)):
            return raw
        if isinstance(raw, list):
            return tuple(self.value(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(raw))
        if not isinstance(raw, dict):  # pragma: no cover - json only yields the types above
            raise SerializeError(f"{where}: unexpected {type(raw).__name__}")
        keys = set(raw)
        kind = next((k for k in _TAGGED if k in keys), None)
        expected = {"enum", "value"} if kind == "enum" else {kind}
        if kind is None or keys != expected:
            raise SerializeError(
                f"{where}: expected an object with one of the keys {list(_TAGGED)} (enum also "
                f"takes 'value'), got keys {sorted(keys)}"
            )
        body = raw[kind]
        if kind == "ref":
            return self.ref(body, where)
        if kind == "float":
            return self.float_(body, where)
        if kind == "dtype":
            if not isinstance(body, str):
                raise SerializeError(f"{where}: dtype must be a string, got {body!r}")
            try:
                return dtype(body)
            except IRError as e:
                raise SerializeError(f"{where}: {e}") from None
        if kind == "enum":
            return self.enum_(body, raw["value"], where)
        if not isinstance(body, dict):
            raise SerializeError(
                f"{where}: {kind} must be a JSON object, got {type(body).__name__}"
            )
        items = {k: self.value(v, f"{where}[{k!r}]", depth + 1) for k, v in body.items()}
        if kind == "attrs":
            try:
                return Attrs(items)
            except IRError as e:
                raise SerializeError(f"{where}: {e}") from None
        return items

    def ref(self, body: Any, where: str) -> Node:
        if isinstance(body, bool) or not isinstance(body, int):
            raise SerializeError(f"{where}: a ref must be an integer, got {body!r}")
        if not 0 <= body < len(self.nodes):
            raise SerializeError(
                f"{where}: ref {body} does not name an earlier node (only 0..{len(self.nodes) - 1} "
                "are defined here; forward references and cycles are not allowed)"
            )
        self.refs.append(body)
        return self.nodes[body]

    @staticmethod
    def float_(body: Any, where: str) -> float:
        if not isinstance(body, str):
            raise SerializeError(f"{where}: a float must be a float.hex string, got {body!r}")
        try:
            return float.fromhex(body)
        except (ValueError, OverflowError):
            raise SerializeError(f"{where}: {body!r} is not a float.hex string") from None

    @staticmethod
    def enum_(name: Any, value: Any, where: str) -> enum.Enum:
        cls = enum_by_name(name) if isinstance(name, str) else None
        if cls is None:
            raise SerializeError(f"{where}: unknown enum type {name!r}")
        try:
            return cls(value)
        except (ValueError, TypeError):
            known = [m.value for m in cls]
            raise SerializeError(
                f"{where}: {value!r} is not a {name}; expected one of {known}"
            ) from None

    def node(self, k: int, entry: Any) -> Node:
        where = f"from_json: nodes[{k}]"
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                and isinstance(entry[1], dict)):  # fmt: skip
            raise SerializeError(
                f"{where}: expected [type_name, {{field: value}}], got {_brief(entry)}"
            )
        tag, raw_fields = entry
        spec = spec_by_tag(tag)
        if spec is None:
            raise SerializeError(f"{where}: unknown node type {tag!r}")
        where = f"{where} ({tag})"
        unknown = sorted(set(raw_fields) - set(spec.fields))
        if unknown:
            raise SerializeError(
                f"{where}: unknown fields {unknown}; {tag} has {list(spec.fields)}"
            )
        self.refs = []
        fields = {n: self.value(v, f"{where}.{n}") for n, v in raw_fields.items()}
        for name in sorted(_tuple_fields(spec.cls) & set(fields)):
            if not isinstance(fields[name], tuple):
                raise SerializeError(
                    f"{where}.{name}: expected a list, got {_brief(raw_fields[name])}"
                )
        node = _build(spec, fields, where)
        self.extent.add(node, self.refs, where)
        return node


def _brief(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _build(spec: NodeSpec, fields: dict[str, Any], where: str) -> Node:
    try:
        node = spec.build(**fields)
    except IRError as e:
        raise SerializeError(f"{where}: {e}") from None
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError) as e:
        # constructors validate meaning; ill-typed fields can trip them before that
        raise SerializeError(f"{where}: invalid field values ({type(e).__name__}: {e})") from None
    if not isinstance(node, Node):
        raise SerializeError(f"{where}: the constructor did not return a node")
    return node


def _document(text: str | bytes) -> dict[str, Any]:
    """The parsed JSON object, checked to have the document layout."""
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SerializeError(f"from_json: not valid JSON: {e}") from None
    except (ValueError, RecursionError) as e:  # huge integers, absurd nesting
        raise SerializeError(f"from_json: unreadable JSON ({type(e).__name__}: {e})") from None
    if not isinstance(doc, dict):
        raise SerializeError(f"from_json: expected a JSON object, got {type(doc).__name__}")
    if doc.get("format") != FORMAT:
        raise SerializeError(f"from_json: format must be {FORMAT!r}, got {doc.get('format')!r}")
    if doc.get("version") != VERSION or isinstance(doc.get("version"), bool):
        raise SerializeError(
            f"from_json: unsupported version {doc.get('version')!r}; this reader knows {VERSION}"
        )
    extra = sorted(set(doc) - {"format", "version", "nodes", "root"})
    if extra or "root" not in doc or not isinstance(doc.get("nodes"), list):
        raise SerializeError(
            "from_json: a document has exactly the keys format, version, nodes (a list) and "
            f"root; got {sorted(doc)}"
        )
    return doc


def from_json(text: str | bytes, *, verify: bool = True) -> Any:
    """Rebuild the value serialised by :func:`to_json`.

    Parameters
    ----------
    text
        A document produced by :func:`to_json` (or written by hand in the same format).
    verify
        When the document holds a PrimFunc or an IRModule, check its PrimFuncs with
        :func:`tilecraft.ir.verify` (an :class:`~tilecraft.errors.IRError` when they are
        malformed). Turn it off only to load deliberately malformed IR.

    Returns
    -------
    Any
        The node (or ``Attrs``/tuple) that was serialised; its type depends on the document.

    Raises
    ------
    SerializeError
        (an :class:`~tilecraft.errors.IRError`) for malformed JSON, a wrong format tag or
        version, unknown node types or enums, wrong field names or types, dangling or forward
        references, any node that fails its own validation, and documents beyond the limits
        of the module docstring.
    """
    if not isinstance(text, (str, bytes, bytearray)):
        raise SerializeError(f"from_json: expected a JSON string, got {type(text).__name__}")
    if len(text) > MAX_DOCUMENT_CHARS:
        raise SerializeError(
            f"from_json: a document of {len(text)} characters exceeds the limit of "
            f"{MAX_DOCUMENT_CHARS}"
        )
    doc = _document(text)
    dec = _Decoder()
    for k, entry in enumerate(doc["nodes"]):
        dec.nodes.append(dec.node(k, entry))
    dec.refs = []
    root = dec.value(doc["root"], "from_json: root")
    dec.extent.check_root(dec.refs, "from_json: root")
    if not isinstance(verify, bool):
        raise SerializeError(f"from_json: verify must be True or False, got {verify!r}")
    if verify and isinstance(root, PrimFunc | IRModule):
        verify_ir(root)
    return root
