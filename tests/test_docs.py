"""The project's own documents ship with it: the architecture document the README links, and
the license pyproject.toml declares."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_links_the_architecture_document() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "](docs/ARCHITECTURE.md)" in readme
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert 150 <= len(doc.splitlines()) <= 250
    for topic in ("## Layers", "## The build pipeline", "## Invariants", "backend_of(target)",
                  "tc.scheduled", "## Testing without a GPU"):  # fmt: skip
        assert topic in doc, topic


def test_the_architecture_document_lists_the_layers_the_layering_test_enforces() -> None:
    layering = (ROOT / "tests" / "test_layering.py").read_text(encoding="utf-8")
    body = layering[layering.index("LAYERS") : layering.index("UNRANKED")]
    layers = re.findall(r'"(\w+)"', body)
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    table = [ln for ln in doc.splitlines() if re.match(r"\| \d+ \|", ln)]
    named = [re.findall(r"`(\w+)`", ln.split("|")[2]) for ln in table]
    assert [name for row in named for name in row] == layers


def test_the_license_file_is_the_apache_license_pyproject_declares() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'license = { text = "Apache-2.0" }' in pyproject.splitlines()
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert " ".join(text.split()[:6]) == "Apache License Version 2.0, January 2004"
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert "http://www.apache.org/licenses/LICENSE-2.0" in text
