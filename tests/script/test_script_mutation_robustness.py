"""Corrupted script never leaks an internal Python error.

It parses, raises ScriptParseError, or (valid script describing malformed IR) raises the
verifier's IRError.
"""

from __future__ import annotations

import random
import re

import pytest
from reference_kernels import ALL

import tilecraft as tc
from tilecraft.errors import IRError, ScriptParseError

WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*|\d+")
SNIPPETS = ["T.int64(0)", "vi", "(", ")", ",", ":", "1.5", '"x"', "T.foo", "T.axis.spatial",
            "T.reads", "T.Buffer", "None", "-", "[", "]", "lambda x: x", "**", "T.init()",
            "T.seq()", "T.let(1) as q", "...", "T.where", "T.alloc_buffer((4,))"]  # fmt: skip


def _mutate(rng: random.Random, text: str) -> str:
    if rng.random() < 0.5:  # swap identifiers/numbers: mostly valid Python, wrong script
        vocab = [*sorted(set(WORD.findall(text))), "spatial", "opaque", "-1", "2**40", "None"]
        for _ in range(rng.randint(1, 3)):
            w = rng.choice(list(WORD.finditer(text)))
            text = text[: w.start()] + rng.choice(vocab) + text[w.end() :]
        return text
    lines = text.splitlines()
    k = rng.randrange(len(lines))
    if rng.random() < 0.5:
        del lines[k]
    else:
        lines.insert(rng.randrange(len(lines)), lines[k])
    text = "\n".join(lines)
    p = rng.randrange(len(text))
    return text[:p] + rng.choice(SNIPPETS) + text[p + rng.randint(0, 8) :]


@pytest.mark.parametrize("seed", range(4))
def test_mutations_raise_only_script_parse_error(seed: int) -> None:
    rng = random.Random(seed)
    messages = []
    verified: list[str] = []  # valid script describing malformed IR: the verifier's errors
    for _ in range(150):
        text = _mutate(rng, rng.choice(list(ALL.values())))
        try:
            tc.script.parse(text)
        except ScriptParseError as e:
            messages.append(e.message)
        except IRError as e:
            messages.append(str(e))
            verified.append(str(e))
    assert messages
    assert all(messages)
    assert all(m.startswith("verify: ") for m in verified), verified
