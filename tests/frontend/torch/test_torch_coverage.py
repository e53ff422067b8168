"""The importer's coverage of torch's own Core ATen operator list."""

import pytest

torch = pytest.importorskip("torch")

from tilecraft.frontend.torch import (  # noqa: E402
    _errors,
    coverage,
    from_exported_program,
)
from tilecraft.frontend.torch._errors import UnsupportedOpsError  # noqa: E402

# Core ATen operators that have a meaning at inference but no converter yet, with the reason
# coverage() gives. A new torch that adds a Core ATen operator fails the test below until it
# is supported or listed here.
NOT_YET: dict[str, str] = {}


def test_core_aten_coverage():
    rows = coverage()
    meaningful = [r for r in rows if not r.status.startswith("excluded")]
    supported = [r for r in meaningful if r.status == "supported"]
    missing = {r.name: r.status for r in rows if r.status.startswith("missing")}
    assert set(missing) - set(NOT_YET) == set(), "Core ATen operators neither supported nor listed"
    assert set(NOT_YET) - set(missing) == set(), "listed as missing but supported now (or gone)"
    assert missing == NOT_YET, "each missing operator says why"
    print(f"supported Core ATen operators: {len(supported)} of {len(meaningful)}")  # noqa: T201
    assert len(supported) >= 179


def test_unsupported_operator_error_says_why(monkeypatch):
    class Det(torch.nn.Module):  # _linalg_det: no converter (and not Core ATen)
        def forward(self, x):
            return torch.linalg.det(x)

    why = {**_errors.WHY_UNSUPPORTED, "aten::_linalg_det": "needs a reason here"}
    monkeypatch.setattr(_errors, "WHY_UNSUPPORTED", why)
    ep = torch.export.export(Det(), (torch.randn(3, 3),))
    with pytest.raises(UnsupportedOpsError, match=r"_linalg_det \(needs a reason here\)"):
        from_exported_program(ep)
