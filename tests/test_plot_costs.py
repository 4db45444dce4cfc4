"""`raycompo.plot(..., x=...)` / `python -m raycompo.plot --x` on the cost axes
(raycompo/costs/axes.py), on run folders whose rows are written here (known costs)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import raycompo
from raycompo.errors import ConfigError
from raycompo.plot import build_parser, main

ROUNDS = np.arange(6)


def write_run(folder, algo: str, seed: int, per_round: dict[str, float], system: bool = False):
    """A run folder whose cumulative cost columns grow by `per_round` each round."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"task": "dro-mnist5k", "algo": algo, "seed": seed,
                                                    "effective_settings": {"lr": 0.1, "seed": seed}}))
    frame = pd.DataFrame({"round": ROUNDS, "val_acc": 0.5 + 0.05 * ROUNDS + 0.01 * seed})
    for col, step in per_round.items():
        frame[col] = step * ROUNDS
    if system:
        frame["sim_time"] = 2.5 * ROUNDS
    frame.to_csv(folder / "metrics.csv", index=False)
    return folder


COSTS = {"samples": 100, "values_up": 10, "values_down": 20, "bytes_up": 40, "bytes_down": 80}


@pytest.fixture
def runs(tmp_path):
    write_run(tmp_path / "feddro-s0", "feddro", 0, COSTS)
    write_run(tmp_path / "feddro-s1", "feddro", 1, {**COSTS, "samples": 300})  # another seed drew more
    write_run(tmp_path / "fedavg-co", "fedavg-co", 0, {k: 2 * v for k, v in COSTS.items()})
    return tmp_path


def _lines(fig) -> dict[str, np.ndarray]:
    ax = fig.axes[0]
    return {line.get_label(): np.asarray(line.get_xdata(), dtype=float) for line in ax.get_lines()}


@pytest.mark.parametrize("axis, feddro_step, fedavg_step", [
    ("samples", (100 + 300) / 2, 200),  # a line's x: the mean over its seeds at each round
    ("values", 10 + 20, 2 * (10 + 20)),  # values = values_up + values_down
    ("bytes", 40 + 80, 2 * (40 + 80)),  # bytes = bytes_up + bytes_down
])
def test_x_is_the_cost_at_each_round(runs, tmp_path, axis, feddro_step, fedavg_step):
    out = tmp_path / f"{axis}.png"
    fig = raycompo.plot(runs, "val_acc", x=axis, out=out)
    assert out.stat().st_size > 10_000
    lines = _lines(fig)
    np.testing.assert_allclose(lines["FedDRO, 2 seeds"], feddro_step * ROUNDS)
    np.testing.assert_allclose(lines["FedAvg (CO)"], fedavg_step * ROUNDS)
    assert fig.axes[0].get_xlabel() == {"samples": "samples drawn", "values": "real values communicated (up + down)",
                                        "bytes": "bytes communicated (up + down)"}[axis]


def test_sim_time_needs_a_simulated_system(runs, tmp_path, capsys):
    with pytest.raises(ConfigError, match=r"--x sim_time.*--system PROFILE.*feddro-s0 \(no sim_time\)"):
        raycompo.plot(runs, "val_acc", x="sim_time")
    assert main([str(runs), "--x", "sim_time", "--out", str(tmp_path / "f.png")]) == 2
    assert "--system" in capsys.readouterr().err
    write_run(tmp_path / "sys" / "a", "feddro", 0, COSTS, system=True)
    fig = raycompo.plot(tmp_path / "sys", "val_acc", x="sim_time")
    np.testing.assert_allclose(_lines(fig)["FedDRO"], 2.5 * ROUNDS)
    assert fig.axes[0].get_xlabel() == "simulated time (s)"


def test_a_run_without_the_ledger_columns_is_named(tmp_path):
    folder = write_run(tmp_path / "old", "fedavg", 0, {})  # written before costs were counted
    with pytest.raises(ConfigError, match=r"--x values needs .*values_up, values_down.*old \(no values_up, values_down\)"):
        raycompo.plot(folder, "val_acc", x="values")
    assert raycompo.plot(folder, "val_acc").axes[0].get_xlabel() == "communication round $s$"  # the default


def test_help_says_what_values_and_bytes_sum():
    text = " ".join(build_parser().format_help().split())  # argparse wraps lines
    assert "values_up + values_down" in text and "bytes_up + bytes_down" in text
    assert build_parser().parse_args(["r"]).x == "round"


def test_spread_columns_have_readable_labels(runs):
    from raycompo.plot import metric_label

    assert metric_label("val_acc_p10") == "validation accuracy: 10th percentile over clients"
    assert metric_label("train_loss_std") == "training loss: standard deviation over clients"


def test_a_real_run_plots_against_the_ledgers_columns(tmp_path):
    from tests.helpers import SMALL_DRO

    raycompo.run("dro-mnist5k", "fedavg", rounds=3, settings=SMALL_DRO, out=tmp_path / "fedavg")
    rows = pd.read_csv(tmp_path / "fedavg" / "metrics.csv")
    for axis, columns in (("values", ["values_up", "values_down"]), ("bytes", ["bytes_up", "bytes_down"]),
                          ("samples", ["samples"])):
        x = _lines(raycompo.plot(tmp_path, "val_acc", x=axis))["FedAvg"]
        np.testing.assert_allclose(x, rows[columns].sum(axis=1).to_numpy())
        assert x[-1] > x[0] == 0  # cumulative, from nothing at round 0


def test_the_figure_s_file_is_the_one_written_and_named(runs, tmp_path, capsys):
    """--out without an extension wrote fig.png but printed `fig`; an extension matplotlib
    cannot write was a traceback after everything was drawn."""
    from raycompo.plot import figure_path

    assert main([str(runs), "--out", str(tmp_path / "noext")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "noext.png")
    assert (tmp_path / "noext.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main([str(runs), "--out", str(tmp_path / "fig.txt")]) == 2
    assert "--out " + str(tmp_path / "fig.txt") + ": a figure is written as one of" in capsys.readouterr().err
    assert not (tmp_path / "fig.txt").exists()
    assert figure_path("a/b.svg").name == "b.svg"
    with pytest.raises(ConfigError, match="not .docx"):
        raycompo.plot(str(runs), out=tmp_path / "x.docx")
