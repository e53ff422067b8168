"""The importer's coverage of torch's own Core ATen operator list."""

import pytest

torch = pytest.importorskip("torch")

from tilecraft.frontend.torch import coverage, from_exported_program  # noqa: E402
from tilecraft.frontend.torch._errors import UnsupportedOpsError  # noqa: E402

# Core ATen operators that have a meaning at inference but no converter yet, with the reason
# coverage() gives. A new torch that adds a Core ATen operator fails the test below until it
# is supported or listed here.
NOT_YET = {
    "aten::_local_scalar_dense": "missing: needs a tensor's value as a host scalar (.item())",
    "aten::nonzero": "missing: needs a data-dependent output shape",
}


def test_core_aten_coverage():
    rows = coverage()
    meaningful = [r for r in rows if not r.status.startswith("excluded")]
    supported = [r for r in meaningful if r.status == "supported"]
    missing = {r.name: r.status for r in rows if r.status.startswith("missing")}
    assert set(missing) - set(NOT_YET) == set(), "Core ATen operators neither supported nor listed"
    assert set(NOT_YET) - set(missing) == set(), "listed as missing but supported now (or gone)"
    assert missing == NOT_YET, "each missing operator says why"
    print(f"supported Core ATen operators: {len(supported)} of {len(meaningful)}")  # noqa: T201
    assert len(supported) >= 175


def test_unsupported_operator_error_says_why():
    class Nonzero(torch.nn.Module):
        def forward(self, x):
            return torch.ops.aten.nonzero(x) + 1

    ep = torch.export.export(Nonzero(), (torch.tensor([0.0, 1.0, 2.0]),))
    with pytest.raises(UnsupportedOpsError, match=r"aten::nonzero \(needs a data-dependent"):
        from_exported_program(ep)
