"""events.csv (`--log-events`, raycompo/runfolder/events_file.py): the file reads back what
was written, refuses a damaged one, drops a last line cut short, and is kept up to the
checkpoint by a resume; the run loop hands a row's events to `Observer.on_events`, never to
metrics.csv. The driver's side (which rows a run makes) is tested with the driver; here a
fake driver puts the rows in."""

from __future__ import annotations

import dataclasses
import shlex

import pytest

from raycompo.engine.loop import emit
from raycompo.errors import ConfigError
from raycompo.runfolder.events_file import FILE, EventsFile, read_events
from raycompo.runfolder.results import RunWriter
from raycompo.system.event_log import EVENT_COLUMNS, EVENTS_KEY, Dispatch
from raycompo.watch.observers import Observer, Observers
from tests.helpers import small_config

HEADER = ",".join(EVENT_COLUMNS) + "\n"


def step_rows(step: int) -> list[dict]:
    """Three made-up events decided at server step `step`: one applied, one stale, one lost
    (a lost dispatch has no staleness; a run without --system no times)."""
    return [Dispatch(step, 3 * step, step % 4, step - 1, 0.5 * step, 0.5 * step + 0.25, "applied", 1).row(),
            Dispatch(step, 3 * step + 1, 1, max(0, step - 3), 0.1 * step, 0.5 * step + 0.3, "stale", 3).row(),
            Dispatch(step, 3 * step + 2, 2, step - 1, None, None, "lost", None).row()]


def test_the_rows_read_back_with_their_types(tmp_path):
    f = EventsFile(tmp_path)
    assert (tmp_path / FILE).read_text() == HEADER  # the header at once
    for step in (1, 2, 3):
        f.append(step_rows(step))
    f.append([])
    f.close()
    rows = read_events(tmp_path)
    assert rows == step_rows(1) + step_rows(2) + step_rows(3)
    assert [type(v) for v in rows[0].values()] == [int, int, int, int, float, float, str, int]
    assert rows[2]["dispatched_s"] is None and rows[2]["finished_s"] is None and rows[2]["staleness"] is None
    assert (tmp_path / FILE).read_text().splitlines()[3] == "1,5,2,0,,,lost,"  # None: an empty cell
    assert read_events(tmp_path, upto_step=2) == step_rows(1) + step_rows(2)
    assert read_events(tmp_path / "nothing") == []


def test_truncate_keeps_the_steps_up_to_the_checkpoint(tmp_path):
    f = EventsFile(tmp_path, step_rows(1))  # a resumed run's kept rows
    f.append(step_rows(2) + step_rows(3))
    f.truncate(2)
    f.append(step_rows(3))  # the replay writes step 3 again, once
    f.close()
    assert read_events(tmp_path) == step_rows(1) + step_rows(2) + step_rows(3)


@pytest.mark.parametrize("line, says", [
    ("1,0,0,0,0.5,0.75,applied", "line 3 is not a row of step, dispatch"),  # a field short
    ("1,0,zero,0,0.5,0.75,applied,0", "line 3 is not a row"),
    ("1,0,0,0,0.5,0.75,merged,0", "with a fate among applied, stale, dropped, lost"),
    ("0,0,0,0,0.5,0.75,applied,0", "line 3 is of step 0 after rows of step 1"),
], ids=["short", "not-a-number", "unknown-fate", "backwards"])
def test_a_damaged_file_is_refused(tmp_path, line, says):
    (tmp_path / FILE).write_text(HEADER + "1,0,0,0,0.5,0.75,applied,0\n" + line + "\n")
    with pytest.raises(ConfigError, match=says):
        read_events(tmp_path)


def test_a_file_of_something_else_is_refused(tmp_path):
    (tmp_path / FILE).write_text("round,direction,key,values,bytes\n")
    with pytest.raises(ConfigError, match="is not a raycompo events.csv"):
        read_events(tmp_path)


def test_a_last_line_cut_short_is_dropped(tmp_path):
    f = EventsFile(tmp_path, step_rows(1))
    f.close()
    with open(tmp_path / FILE, "a") as out:
        out.write("2,6,2,1,1.0,1.2")  # killed while writing it
    assert read_events(tmp_path) == step_rows(1)
    (tmp_path / FILE).write_text(HEADER[:10])  # even the header cut short: no rows
    assert read_events(tmp_path) == []


class Seen(Observer):
    def __init__(self):
        self.events, self.rows = [], []

    def on_events(self, rows):
        self.events.append(rows)

    def on_row(self, row):
        self.rows.append(row)


def test_emit_hands_the_events_to_on_events_and_never_to_metrics_csv(tmp_path):
    cfg = {**small_config().to_dict(), "log_events": True}
    writer, seen = RunWriter(tmp_path, cfg), Seen()
    watch = Observers([writer, seen])
    emit({"round": 0, "train_loss": 1.0}, watch)  # the initial row: no events
    emit({"round": 1, "train_loss": 0.5, EVENTS_KEY: step_rows(1)}, watch)
    emit({"round": 2, "train_loss": 0.25, EVENTS_KEY: []}, watch)  # a step that decided no fate
    writer.on_end("completed", seen.rows[-1])
    assert seen.events == [step_rows(1), []]
    assert all(EVENTS_KEY not in r for r in seen.rows)
    assert (tmp_path / "metrics.csv").read_text().splitlines()[0] == "round,train_loss,diverged"
    assert read_events(tmp_path) == step_rows(1)


def test_a_run_without_log_events_has_no_events_csv(tmp_path):
    writer = RunWriter(tmp_path, small_config().to_dict())
    writer.on_end("completed", {"round": 0})
    assert not (tmp_path / FILE).exists()


# --- through engine.run, with a driver that logs made-up events -----------------------------


@pytest.fixture
def fake_events(monkeypatch):
    """Every server round's row of a run with log_events carries `step_rows(round)`, in
    place of what the driver put there: these tests are of the run folder's side."""
    from raycompo.engine.federation import Federation

    real = Federation.run_round

    def run_round(self):
        row = real(self)
        if self.cfg.log_events:
            made_up = step_rows(row["round"])
            self.events.written += len(made_up) - len(row[EVENTS_KEY])  # the checkpoint counts what the file holds
            row[EVENTS_KEY] = made_up
        return row

    monkeypatch.setattr(Federation, "run_round", run_round)


def logged(rounds: int):
    return dataclasses.replace(small_config("fedavg", rounds=rounds, lr=0.1), log_events=True)


def test_a_run_writes_events_csv_and_its_result_holds_them(tmp_path, fake_events):
    from raycompo.engine import run
    from raycompo.runfolder.results import read_config

    result = run(logged(3), out=str(tmp_path))
    assert read_events(tmp_path) == step_rows(1) + step_rows(2) + step_rows(3)
    assert list(result.events.columns) == list(EVENT_COLUMNS)
    assert result.events["step"].tolist() == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert result.events["fate"].tolist() == ["applied", "stale", "lost"] * 3
    assert read_config(tmp_path)["log_events"] is True
    in_memory = run(logged(3))  # no folder: kept in memory
    assert in_memory.event_rows == step_rows(1) + step_rows(2) + step_rows(3)
    assert run(small_config("fedavg", rounds=1, lr=0.1)).events.empty


def test_a_resume_continues_events_csv_exactly(tmp_path, fake_events):
    from raycompo.engine import run

    run(logged(4), out=str(tmp_path / "whole"))
    run(logged(2), out=str(tmp_path / "cut"))
    with open(tmp_path / "cut" / FILE, "a") as out:  # killed after step 3's rows, before its checkpoint
        out.write("3,9,3,2,1.5,1.75,applied,1\n3,10,1")
    run(logged(4), out=str(tmp_path / "cut"), resume=True)
    assert (tmp_path / "cut" / FILE).read_bytes() == (tmp_path / "whole" / FILE).read_bytes()


def test_a_resume_refuses_a_missing_events_csv(tmp_path, fake_events):
    from raycompo.engine import run

    run(logged(2), out=str(tmp_path))
    (tmp_path / FILE).unlink()
    metrics = (tmp_path / "metrics.csv").read_bytes()
    with pytest.raises(ConfigError, match=r"events.csv is missing.*checkpoint \(step 2\)"):
        run(logged(4), out=str(tmp_path), resume=True)
    assert (tmp_path / "metrics.csv").read_bytes() == metrics  # refused before anything was written


def test_a_resume_cannot_switch_log_events(tmp_path):
    from raycompo.engine import run
    from raycompo.runfolder.results import resumed_config

    run(small_config("fedavg", rounds=1, lr=0.1), out=str(tmp_path))
    with pytest.raises(ConfigError, match="cannot change --log-events True"):
        resumed_config(tmp_path, rounds=2, changes={"log_events": True})


def test_overwrite_removes_events_csv(tmp_path):
    from raycompo.runfolder.results import prepare_folder

    RunWriter(tmp_path, {**small_config().to_dict(), "log_events": True}).on_end("completed", {"round": 0})
    prepare_folder(tmp_path, overwrite=True)
    assert not (tmp_path / FILE).exists()


# --- the option ------------------------------------------------------------------------------


def test_the_flag_and_the_keyword_set_log_events(fake_events):
    import raycompo
    from raycompo.run import build_parser, config_from_args
    from tests.helpers import SMALL_DRO

    assert config_from_args(build_parser().parse_args(["--log-events"])).log_events is True
    assert config_from_args(build_parser().parse_args([])).log_events is False
    result = raycompo.run("dro-mnist5k", "fedavg", rounds=1, settings={**SMALL_DRO, "lr": 0.1}, log_events=True)
    assert result.config["log_events"] is True and result.event_rows == step_rows(1)
    with pytest.raises(ConfigError, match="log_events"):
        raycompo.run("dro-mnist5k", "fedavg", rounds=1, log_events="yes")


def test_a_claims_variant_and_a_sweeps_trial_repeat_log_events_as_the_flag(tmp_path):
    from raycompo.reproduce.runner import command, plan
    from raycompo.reproduce.spec import Claim, Panel, V
    from raycompo.run import build_parser, config_from_args
    from raycompo.tune.results import command_line

    claim = Claim(name="c", source="s", title="t", task="synthetic", rounds=2, settings={"n_clients": 6},
                  variants=(V("ev", "fedavg", log_events=True),), metrics=(), panels=(Panel("val_acc", "a"),),
                  paper_says="p")
    (job,) = plan(claim, tmp_path, seeds=1)
    again = config_from_args(build_parser().parse_args(shlex.split(command(job))[3:]))
    assert job.cfg.log_events is True and again.log_events is True
    line = command_line(dataclasses.replace(small_config(), log_events=True).to_dict())  # a sweep's trial
    assert config_from_args(build_parser().parse_args(shlex.split(line)[3:])).log_events is True


def test_a_recovery_rolls_the_events_back_to_its_checkpoint(tmp_path):
    """What a dead actor's recovery does before it replays from the checkpoint of step 2
    (runner._roll_back): the folder's events.csv and a run without folder's kept events."""
    from raycompo.engine.runner import KeptCosts, KeptInMemory, _roll_back

    writer = RunWriter(tmp_path, {**small_config().to_dict(), "log_events": True})
    kept = KeptInMemory()
    rows = [{"round": r} for r in range(4)]
    for step in (1, 2, 3):
        writer.on_events(step_rows(step))
        kept.on_events(step_rows(step))
    _roll_back(rows, writer, kept, KeptCosts([]), 2)
    assert read_events(tmp_path) == kept.events == step_rows(1) + step_rows(2)
