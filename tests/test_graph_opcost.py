"""Per-operator cost recording (needs torch)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from horus.graph.opcost import op_table, record_ops  # noqa: E402


def test_linear_layer_records_training_matmuls() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    recs = {b: record_ops(model, (torch.randn(b, 64),)) for b in (2, 4)}
    # forward + weight-gradient matmuls for both layers; the input gradient only for the second (x needs none)
    macs = 3 * 32 * 8 + 2 * 64 * 32
    flops = sum(r.flops for r in recs[4] if r.kind == "matrix")
    assert flops == pytest.approx(2 * 4 * macs, rel=0.02)
    rows = op_table(recs[2], recs[4], 2, 4)
    per_sample = sum(r["count"] * r["flops_per_sample"] for r in rows)
    assert per_sample == pytest.approx(2 * macs, rel=0.02)
    assert all(r["kind"] in {"matrix", "kernel", "host"} for r in rows)


def test_rnn_internal_ops_are_tagged() -> None:
    """On the meta device (as the zoo builds models) the LSTM decomposes into per-step ops, tagged ``_rnn``."""
    with torch.device("meta"):
        model = torch.nn.LSTM(8, 16, batch_first=True)

    class Wrap(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = model

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.rnn(x)[0]

    recs = record_ops(Wrap(), (torch.randn(2, 5, 8, device="meta"),))
    kinds = {r.kind for r in recs}
    assert "matrix_rnn" in kinds and "kernel_rnn" in kinds
