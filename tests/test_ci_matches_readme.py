"""CI runs exactly the test command the README gives a new user."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_test_command() -> str:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    commands = [ln.strip() for ln in lines if "pytest" in ln and ln.strip().startswith("python")]
    assert len(commands) == 1, f"expected one test command in README.md, found {commands}"
    return commands[0]


def test_ci_runs_the_readme_test_command() -> None:
    ci_lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert _readme_test_command() in ci_lines
