"""Seeded mutation fuzzing of the three IR loaders (importable by tests and measurement scripts).

Each campaign mutates valid documents from several workloads and feeds them to one loader:

- ``"script"``: :func:`tilecraft.script.parse` on printed PrimFuncs and modules;
- ``"graph"``: :func:`tilecraft.graph.script.parse` on printed graph functions and modules;
- ``"json"``: :func:`tilecraft.ir.from_json` on :func:`tilecraft.ir.to_json` documents.

Mutations: character and token edits, line edits, truncation, deep nesting, huge numbers, NaN
and infinities, wrong types; for JSON also wrong field shapes, bad, forward and cyclic
references, shared references and exponential sharing. The rules every case must keep: only
:class:`~tilecraft.errors.TilecraftError` leaves a loader, nothing hangs (a per-case deadline),
and an accepted document prints; printing it and loading that again gives the same IR (and,
for the text loaders, the same text; for JSON, the same document).

Only public API that existed before these tests is used, so the same campaign measures an
older tree (``PYTHONPATH=<tree> python tests/script/loader_fuzz.py``).
"""

from __future__ import annotations

import collections
import json
import math
import random
import re
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from loader_corpus import ODD_NAMES as _ODD_NAMES
from loader_corpus import corpus

import tilecraft as tc
from tilecraft.errors import TilecraftError

LOADERS = ("script", "graph", "json")
CASE_SECONDS = 5.0  # a case running longer counts as a hang


class Hang(BaseException):
    """A case ran past its deadline."""


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise :class:`Hang` in the main thread after ``seconds``."""

    def fire(signum: int, frame: object) -> None:
        raise Hang

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Stats:
    """Outcomes of one campaign."""

    cases: int = 0
    accepted: int = 0
    rejected: int = 0  # a TilecraftError
    raw: collections.Counter[str] = field(default_factory=collections.Counter)
    hangs: int = 0
    broken: list[str] = field(default_factory=list)  # accepted but not printable/round-trip
    examples: dict[str, str] = field(default_factory=dict)  # first input per raw error type

    def raw_total(self) -> int:
        """Raw (non-tilecraft) exceptions, hangs included."""
        return sum(self.raw.values()) + self.hangs

    def summary(self) -> str:
        """One line of figures."""
        raw = ", ".join(f"{k} {v}" for k, v in sorted(self.raw.items())) or "none"
        return (
            f"{self.cases} cases: {self.accepted} accepted, {self.rejected} tilecraft errors, "
            f"raw exceptions {self.raw_total()} ({raw}; hangs {self.hangs}), "
            f"accepted but not round-tripping {len(self.broken)}"
        )


# text mutations -----------------------------------------------------------------------------
_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*|\d+(?:\.\d+)?")
_SNIPPETS = [
    "(", ")", "[", "]", ",", ":", ".", "-", "*", "//", " ", "\n", "    ", "\t", "\x00", "é",
    "𝑥", "T.", "R.", "None", "lambda x: x", "**", "...", "1e999", "-1e999", "2**64",
    "9" * 400, str(2**63), str(-(2**31) - 1), '"nan"', 'float("nan")', "T.float32(\"nan\")",
    "T.int64(9223372036854775808)", "0x10", "1j", "b'x'", '"int1024"', '"float32x0"',
    '"bool"', "T.grid(", "T.block(", "T.axis.remap(\"SR\", [i, j])", "T.reads()",
    "T.init()", "T.seq()", "T.let(1) as q", "T.alloc_buffer((4,))", "R.Tensor((", "cls.",
    "R.call_tir(", "R.dataflow()", "R.output(", "await x", "yield", "@T.prim_func",
]  # fmt: skip


_KEEP = {"T", "R", "def", "for", "in", "with", "as", "if", "else", "and", "or", "not", "True",
         "False", "None", "range", "return", "class", "Module", "cls", "prim_func",
         "ir_module", "function"}  # fmt: skip


def _text_mutation(rng: random.Random, text: str) -> str:
    if len(text.splitlines()) < 2:
        return text + rng.choice(_SNIPPETS)
    kind = rng.randrange(10)
    if kind == 9:  # consistent renaming to unusual identifiers: usually still valid
        names = sorted(set(re.findall(r"\b[A-Za-z_]\w*\b", text)) - _KEEP)
        if names:
            old = rng.choice(names)
            text = re.sub(rf"\b{re.escape(old)}\b", rng.choice(_ODD_NAMES), text)
        return text
    if kind == 0:  # character edits
        for _ in range(rng.randint(1, 4)):
            p = rng.randrange(len(text) + 1)
            text = (
                text[:p]
                + rng.choice([*_SNIPPETS, chr(rng.randrange(32, 127))])
                + text[p + rng.randint(0, 3) :]
            )
        return text
    if kind == 1:  # token swaps: mostly valid Python, wrong script
        words = list(_WORD.finditer(text))
        vocab = [*sorted({m.group() for m in words}), "-1", "0", "2**40", "None", "True"]
        for _ in range(rng.randint(1, 3)):
            m = rng.choice(words)
            text = text[: m.start()] + rng.choice(vocab) + text[m.end() :]
            words = list(_WORD.finditer(text))
        return text
    if kind == 2:  # line edits
        lines = text.splitlines()
        k = rng.randrange(len(lines))
        op = rng.randrange(4)
        if op == 0:
            del lines[k]
        elif op == 1:
            lines.insert(rng.randrange(len(lines)), lines[k])
        elif op == 2:
            lines[k] = "    " + lines[k]
        else:
            lines[k] = lines[k][4:]
        return "\n".join(lines)
    if kind == 3:  # truncation
        return text[: rng.randrange(len(text))]
    if kind == 4:  # numbers: huge, negative, special
        nums = list(re.finditer(r"\b\d+(?:\.\d+)?\b", text))
        if nums:
            m = rng.choice(nums)
            new = rng.choice(["0", "-1", str(2**31), str(2**63), str(2**64), "9" * 4000,
                              "1e308", "1e999", "0.0", "-0.0", "3.5", "10**400"])  # fmt: skip
            text = text[: m.start()] + new + text[m.end() :]
        return text
    if kind == 5:  # strings: dtypes, names, scopes
        strs = list(re.finditer(r'"[^"\n]*"', text))
        if strs:
            m = rng.choice(strs)
            new = rng.choice(['"int1024"', '"float32x0"', '"bool"', '"int64"', '""', '"a b"',
                              '"\\ud800"', '"𝑥"', '"shared"', "7", "None", '"nan"'])  # fmt: skip
            text = text[: m.start()] + new + text[m.end() :]
        return text
    return _deep_mutation(rng, text, kind - 6)


def _deep_mutation(rng: random.Random, text: str, which: int) -> str:
    """Deep nesting: brackets, unary chains, long sums, nested lists, let chains."""
    n = rng.choice([3, 50, 150, 300, 1000, 5000])
    words = list(re.finditer(r"\b[A-Za-z_]\w*\b(?!\()|\b\d+\b", text))
    if not words:
        return text
    m = rng.choice(words)
    tok = m.group()
    if which == 0:
        new = rng.choice(["(" * n + tok + ")" * n, "-" * n + tok, "not " * n + tok,
                          " + ".join([tok] * n), "[" * n + tok + "]" * n])  # fmt: skip
        return text[: m.start()] + new + text[m.end() :]
    if which == 1:  # many statements at one place (lets, seqs, loops)
        lines = text.splitlines()
        k = rng.randrange(1, len(lines))
        indent = re.match(r"\s*", lines[k]).group()  # type: ignore[union-attr]
        pick = rng.randrange(3)
        if pick == 0:
            extra = [f"{indent}v{j}: T.int32 = {j}" for j in range(n)]
        elif pick == 1:
            extra = [indent + "    " * j + "with T.seq():" for j in range(min(n, 120))]
        else:
            extra = [indent + "    " * j + f"for q{j} in range(2):" for j in range(min(n, 120))]
        return "\n".join([*lines[:k], *extra, *lines[k:]])
    return text.replace(tok, f"T.max({tok}, " * min(n, 300) + tok + ")" * min(n, 300), 1)


# JSON mutations -----------------------------------------------------------------------------
_JSON_STRINGS = ["Var", "Buffer", "Add", "For", "Block", "PrimFunc", "IRModule", "Range",
                 "BufferRegion", "int32", "int1024", "float32x0", "handle", "serial",
                 "ForKind", "IterKind", "", "0x1p99999", "nan", "inf", "𝑥", "\ud800"]  # fmt: skip
_JSON_SCALARS: list[Any] = [0, -1, 1, 2**31, 2**63, 2**64, 10**400, True, False, None, 1.5,
                            "x", [], {}, [[]], {"ref": 0}]  # fmt: skip


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*path, i))


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    _get(doc, path[:-1])[path[-1]] = value
    return doc


def _json_mutation(rng: random.Random, text: str) -> str:
    try:
        return _json_edit(rng, text)
    except (IndexError, KeyError, TypeError, ValueError):  # an earlier edit broke the layout
        return _text_mutation(rng, text)


def _json_edit(rng: random.Random, text: str) -> str:
    kind = rng.randrange(8)
    if kind == 0:
        return _text_mutation(rng, text) if rng.random() < 0.5 else text[: rng.randrange(len(text))]
    try:
        doc = json.loads(text)
        nodes = doc["nodes"]
        size = len(nodes)
        assert size > 0
    except (ValueError, TypeError, KeyError, AssertionError, RecursionError):  # not JSON now
        return _text_mutation(rng, text)
    if kind == 1:  # refs: forward, self (a cycle), out of range, to a node of another kind
        refs = [p for p in _paths(doc) if isinstance(_get(doc, p), dict) and "ref" in _get(doc, p)]
        for _ in range(rng.randint(1, 3)):
            if refs:
                p = rng.choice(refs)
                here = p[1] if len(p) > 1 and p[0] == "nodes" else size
                target = rng.choice([here, here + 1, size, -1, rng.randrange(size), 10**6])
                _set(doc, p, {"ref": target})
        return json.dumps(doc)
    if kind == 2 and rng.random() < 0.4:  # names and block names: hints that must survive
        named = [p for p in _paths(doc) if p and p[-1] == "name"]
        for p in rng.sample(named, min(len(named), 3)):
            _set(doc, p, rng.choice([*_ODD_NAMES, "", "a b", "\ud800", "𝑥" * 3, "0x"]))
        return json.dumps(doc)
    if kind == 2:  # scalars replaced
        for _ in range(rng.randint(1, 3)):
            p = rng.choice(list(_paths(doc)))
            v = _get(doc, p)
            if isinstance(v, str):
                _set(doc, p, rng.choice(_JSON_STRINGS))
            elif not isinstance(v, (dict, list)) or rng.random() < 0.2:
                doc = _set(doc, p, rng.choice(_JSON_SCALARS))
        return json.dumps(doc)
    if kind == 3:  # field shapes: wrap, unwrap, delete, add
        p = rng.choice([p for p in _paths(doc) if len(p) >= 4] or [()])
        if p:
            v = _get(doc, p)
            op = rng.randrange(4)
            if op == 0:
                _set(doc, p, [v])
            elif op == 1 and isinstance(v, list) and v:
                _set(doc, p, v[0])
            elif op == 2 and isinstance(_get(doc, p[:-1]), dict):
                del _get(doc, p[:-1])[p[-1]]
            else:
                parent = _get(doc, p[:-1])
                if isinstance(parent, dict):
                    parent["extra"] = 1
        return json.dumps(doc)
    if kind == 4:  # table edits
        op = rng.randrange(3)
        k = rng.randrange(size)
        if op == 0:
            del nodes[k]
        elif op == 1:
            nodes.insert(k, nodes[rng.randrange(size)])
        else:
            j = rng.randrange(size)
            nodes[k], nodes[j] = nodes[j], nodes[k]
        return json.dumps(doc)
    if kind == 5:  # shared references: point some refs at one existing node
        refs = [p for p in _paths(doc) if isinstance(_get(doc, p), dict) and "ref" in _get(doc, p)]
        target = _get(doc, rng.choice(refs)) if refs else {"ref": 0}
        for p in rng.sample(refs, min(len(refs), rng.randint(1, 5))):
            if len(p) > 1 and p[0] == "nodes" and p[1] > target["ref"]:
                _set(doc, p, dict(target))
        return json.dumps(doc)
    if kind == 6:  # deep or exponential chains appended to the table
        n = rng.choice([10, 200, 5000, 12000])
        exponential = rng.random() < 0.3
        base = len(nodes) - 1
        for j in range(n if not exponential else 60):
            prev = base + j
            b = {"ref": prev} if exponential else {"ref": 0}
            nodes.append(["Add", {"a": {"ref": prev}, "b": b}])
        doc["root"] = {"ref": len(nodes) - 1}
        return json.dumps(doc)
    depth = rng.choice([10, 70, 1000, 100000])  # deeply nested field values (JSON itself too)
    p = rng.choice([p for p in _paths(doc) if len(p) >= 4] or [("root",)])
    return json.dumps(_set(doc, p, "__NEST__")).replace('"__NEST__"', "[" * depth + "]" * depth)


# loaders and their checks -------------------------------------------------------------------
def _load(loader: str, text: str) -> Any:
    from tilecraft.graph import script as gscript

    if loader == "script":
        return tc.script.parse(text)
    if loader == "graph":
        return gscript.parse(text)
    return tc.ir.from_json(text)


def _check_accepted(loader: str, value: Any) -> str | None:
    """Why an accepted document fails to print and round-trip (None when it is fine)."""
    from tilecraft.graph import script as gscript

    if loader == "json":
        printed = tc.script.to_script(value) if isinstance(value, tc.ir.Node) else repr(value)
        if isinstance(value, tc.ir.Node) and not printed:
            return "printed nothing"
        again = tc.ir.to_json(value)
        back = tc.ir.from_json(again)
        if not tc.ir.structural_equal(back, value, map_free_vars=True):
            return "JSON round trip changed the IR"
        if tc.ir.to_json(back) != again:
            return "JSON round trip changed the document"
        return None
    show = tc.script.to_script if loader == "script" else gscript.to_script
    text = show(value)
    back = _load(loader, text)
    if not tc.ir.structural_equal(back, value, map_free_vars=True):
        return "print/parse changed the IR"
    if show(back) != text:
        return "print/parse changed the text"
    return None


def run_case(loader: str, text: str, stats: Stats) -> None:
    """Load ``text`` and record the outcome in ``stats``."""
    stats.cases += 1
    try:
        with deadline(CASE_SECONDS):
            try:
                value = _load(loader, text)
            except TilecraftError:
                stats.rejected += 1
                return
            except Exception as e:  # noqa: BLE001  the figure this harness measures
                name = type(e).__name__
                stats.raw[name] += 1
                stats.examples.setdefault(name, text)
                return
            stats.accepted += 1
            try:
                why = _check_accepted(loader, value)
            except Exception as e:  # noqa: BLE001  printing an accepted document must work
                why = f"{type(e).__name__}: {str(e)[:200]}"
            if why is not None:
                stats.broken.append(why)
                stats.examples.setdefault("broken: " + why.split(":")[0], text)
    except Hang:
        stats.hangs += 1
        stats.examples.setdefault("hang", text)
    except RecursionError:  # deep nesting that escaped both the loader and its own handling
        stats.raw["RecursionError"] += 1


def campaign(
    loader: str, seed: int, count: int, seconds: float = math.inf, docs: list[str] | None = None
) -> Stats:
    """Run ``count`` mutated documents (or until ``seconds`` pass) through ``loader``."""
    rng = random.Random(seed)
    docs = docs if docs is not None else corpus(loader)
    mutate = _json_mutation if loader == "json" else _text_mutation
    stats = Stats()
    start = time.monotonic()
    for _ in range(count):
        if time.monotonic() - start > seconds:
            break
        text = rng.choice(docs)
        for _ in range(rng.choice([1, 1, 1, 1, 1, 2, 3])):
            text = mutate(rng, text)
        run_case(loader, text, stats)
    return stats


def main(argv: list[str]) -> None:
    """``loader_fuzz.py CORPUS.json SEEDS COUNT``: print figures per loader as JSON lines.

    ``CORPUS.json`` maps each loader to its documents (``-``: build them in this tree).
    """
    docs = None
    if argv[1] != "-":
        with open(argv[1], encoding="utf-8") as f:
            docs = json.load(f)
    seeds, count = int(argv[2]), int(argv[3])
    for loader in LOADERS:
        total = Stats()
        for seed in range(seeds):
            s = campaign(loader, seed, count, docs=docs[loader] if docs else None)
            total.cases += s.cases
            total.accepted += s.accepted
            total.rejected += s.rejected
            total.raw.update(s.raw)
            total.hangs += s.hangs
            total.broken += s.broken
        line = {"loader": loader, "summary": total.summary(), "raw": dict(total.raw),
                "hangs": total.hangs, "broken": collections.Counter(total.broken)}  # fmt: skip
        sys.stdout.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    main(sys.argv)
