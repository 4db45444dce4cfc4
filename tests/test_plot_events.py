"""`python -m raycompo.plot RUN --events staleness|participation` (raycompo/plot.py) on
events.csv files written here (known counts)."""

from __future__ import annotations

import json

import pytest

import raycompo
from raycompo.errors import ConfigError
from raycompo.plot import main
from raycompo.runfolder.events_file import EventsFile
from raycompo.system.event_log import Dispatch

STALENESS = [0, 0, 1, 2, 2, 2, 5]
"""The applied updates' staleness of the run written by `write_events`."""


def write_events(folder, shift: int = 0):
    """A run folder whose events.csv holds applied updates of staleness STALENESS (+ shift)
    by clients 0, 1, 1, 2, 2, 2, 3, and a stale and a lost dispatch (not drawn)."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"task": "dro-mnist5k", "algo": "fedavg", "log_events": True}))
    rows = [Dispatch(i + 1, i, [0, 1, 1, 2, 2, 2, 3][i], i + 1 - tau - shift, 0.5 * i, 0.5 * i + 1.0, "applied",
                     tau + shift).row() for i, tau in enumerate(STALENESS)]
    rows += [Dispatch(8, 7, 4, 0, 0.0, 4.0, "stale", 8).row(), Dispatch(8, 8, 5, 6, 3.0, 3.5, "lost", None).row()]
    f = EventsFile(folder, rows)
    f.close()
    return folder


def test_staleness_is_a_histogram_of_the_applied_updates(tmp_path):
    run = write_events(tmp_path / "run")
    out = tmp_path / "staleness.png"
    fig = raycompo.plot(run, events="staleness", out=out)
    assert out.stat().st_size > 10_000
    heights = [p.get_height() for p in fig.axes[0].patches]  # a bar per bin 0..5
    assert heights == [2, 1, 3, 0, 0, 1]


def test_participation_counts_applied_dispatches_per_client(tmp_path):
    one, two = write_events(tmp_path / "a"), write_events(tmp_path / "b", shift=1)
    fig = raycompo.plot([one, two], events="participation")
    bars = fig.axes[0].patches
    assert [b.get_height() for b in bars] == [1, 2, 3, 1] * 2  # clients 0-3; 4 (stale) and 5 (lost) not
    assert len(fig.axes[0].get_legend().get_texts()) == 2


def test_a_run_without_events_csv_is_one_clear_error(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.csv").write_text("round,val_acc\n0,0.5\n")
    with pytest.raises(ConfigError, match="no events.csv; run it with --log-events"):
        raycompo.plot(run, events="staleness")
    assert main([str(run), "--events", "participation", "--out", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "run it with --log-events" in err
    assert not (tmp_path / "x.png").exists()


def test_the_command_line_draws_from_a_folder_of_runs(tmp_path, capsys):
    write_events(tmp_path / "runs" / "a")
    out = tmp_path / "p.png"
    assert main([str(tmp_path / "runs"), "--events", "staleness", "--out", str(out)]) == 0
    assert out.stat().st_size > 10_000 and capsys.readouterr().out.strip() == str(out)
