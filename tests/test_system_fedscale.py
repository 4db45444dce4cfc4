"""docs/system.md's recipe for FedScale's model: a device table made from FedScale's
per-device `computation` (ms per sample) and `communication` (kbit/s) gives, through
raycompo's clock, FedScale's own round duration.

FedScale (github.com/SymbioticLab/FedScale, commit 7ec441c; v0.5 the same):
fedscale/cloud/internal/client_metadata.py, `ClientMetadata.get_completion_time`:

    computation   = augmentation_factor * batch_size * local_steps * compute_speed / 1000.
                    (augmentation_factor=3.0: the backward pass costs twice the forward)
    communication = (upload_size + download_size) / bandwidth

with bandwidth its trace's `communication` in kbit/s and the sizes in kbit as
fedscale/cloud/aggregation/aggregator.py makes them: `bytes / 1024.0 * 8.0` (a kbit of
1024 bit)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from raycompo.configuration.config import RunConfig
from raycompo.engine import run
from raycompo.engine.federation import Federation

TAU, B = 3, 10
FPP = 6.0  # flop_per_sample_per_param (raycompo's default)


def fedscale_round_s(computation_ms: float, communication_kbps: float, samples: float, bytes_down: float,
                     bytes_up: float) -> float:
    """FedScale's get_completion_time of one client (computation + communication), its
    sizes in its kbit (bytes / 1024 * 8)."""
    computation = 3.0 * samples * computation_ms / 1000.0
    communication = (bytes_up / 1024.0 * 8.0 + bytes_down / 1024.0 * 8.0) / communication_kbps
    return computation + communication


def recipe_row(computation_ms: float, communication_kbps: float, d: int) -> str:
    """docs/system.md's device CSV row for one FedScale device."""
    flops = FPP * d / (3.0 * computation_ms / 1000.0)
    bandwidth = communication_kbps * 128.0  # bytes/s: 1024 bit / 8
    return f"{flops!r},{bandwidth!r},{bandwidth!r},0\n"


@pytest.mark.parametrize("computation_ms, communication_kbps", [(35.0, 5000.0), (120.0, 800.0), (9.5, 31000.0)])
def test_the_fedscale_recipe_gives_fedscales_round_duration(tmp_path, computation_ms, communication_kbps):
    settings = {"n_clients": 4, "clients_per_round": 4, "tau": TAU, "batch_size": B, "min_samples": 40}
    base = RunConfig(task="synthetic", algo="fedavg", rounds=2, backend="inline", settings=settings)
    d = Federation(base, start=False).w.numel()
    (tmp_path / "devices.csv").write_text("flops,uplink_bytes_per_s,downlink_bytes_per_s,latency_s\n"
                                          + recipe_row(computation_ms, communication_kbps, d))
    (tmp_path / "fedscale.yaml").write_text(f"name: fedscale\ndevices: {{csv: devices.csv, "
                                            f"flop_per_sample_per_param: {FPP}}}\n")
    rows = run(dataclasses.replace(base, system=str(tmp_path / "fedscale.yaml"))).rows
    for prev, row in zip(rows, rows[1:]):
        samples, down, up = ((row[k] - prev[k]) / 4 for k in ("samples", "bytes_down", "bytes_up"))
        assert samples == TAU * B  # every member did the same work: the round is any member's time
        expect = fedscale_round_s(computation_ms, communication_kbps, samples, down, up)
        assert row["sim_time"] - prev["sim_time"] == pytest.approx(expect, rel=1e-12)


def test_docs_state_the_recipe_tested_here():
    text = " ".join((Path(__file__).resolve().parents[1] / "docs" / "system.md").read_text().split())
    assert "`flops = flop_per_sample_per_param * d / (3 * computation / 1000)`" in text
    assert "both bandwidths `communication * 128` bytes/s" in text
