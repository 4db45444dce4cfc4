"""The public functions check their arguments the way the command line checks its options
(issue 27, part 2): each mistake a notebook user makes is one `raycompo.ConfigError` naming
the function, the argument, what it got and what it accepts, before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import raycompo
from tests.helpers import SMALL_DRO

X, Y = np.zeros((12, 3), dtype="float32"), np.arange(12) % 2
PAIR = (np.zeros((4, 3), dtype="float32"), np.arange(4) % 2)


def _run(**kw):
    return raycompo.run("dro-mnist5k", "fedavg", **{"rounds": 1, "settings": SMALL_DRO, **kw})


CASES = [
    # (call, argument, what it got as the message shows it, what it accepts)
    (lambda: _run(rounds="5"), "run", "rounds", "'5' (a str)", "an integer >= 1"),
    (lambda: _run(rounds=-1), "run", "rounds", "-1 (an int)", "an integer >= 1"),
    (lambda: _run(rounds=2.5), "run", "rounds", "2.5 (a float)", "an integer >= 1"),
    (lambda: _run(rounds=True), "run", "rounds", "True (a bool)", "an integer >= 1"),
    (lambda: _run(seed="0"), "run", "seed", "'0' (a str)", "an integer >= 0"),
    (lambda: _run(backend="local"), "run", "backend", "'local' (a str)", "one of 'ray', 'inline'"),
    (lambda: _run(settings=[("lr", 0.1)]), "run", "settings", "[('lr', 0.1)] (a list)", "a dict with string keys"),
    (lambda: _run(settings={1: 0.1}), "run", "settings", "{1: 0.1} (a dict)", "a dict with string keys"),
    (lambda: _run(threads=0), "run", "threads", "0 (an int)", "an integer >= 1 or None"),
    (lambda: _run(out=3), "run", "out", "3 (an int)", "a path (a str or a pathlib.Path) or None"),
    (lambda: _run(cpus_per_actor="1"), "run", "cpus_per_actor", "'1' (a str)", "a number > 0"),
    (lambda: _run(gpus_per_actor=float("nan")), "run", "gpus_per_actor", "nan (a float)", "a number >= 0"),
    (lambda: _run(eval_clients=0), "run", "eval_clients", "0 (an int)", "an integer >= 1 or None"),
    (lambda: _run(checkpoint_every="2"), "run", "checkpoint_every", "'2' (a str)", "an integer >= 1 or None"),
    (lambda: _run(max_failures=-1), "run", "max_failures", "-1 (an int)", "an integer >= 0"),
    (lambda: _run(vectorize=True), "run", "vectorize", "True (a bool)", "one of 'auto', 'on', 'off'"),
    (lambda: _run(on_row=[]), "run", "on_row", "[] (a list)", "a function or None"),
    (lambda: _run(progress="yes"), "run", "progress", "'yes' (a str)", "True or False or one of 'auto'"),
    (lambda: _run(tracker="tensorboard"), "run", "tracker", "'tensorboard' (a str)", "one of 'mlflow', 'wandb'"),
    (lambda: _run(observers=[print]), "run", "observers", "(a list)", "a list of Observer objects"),
    (lambda: raycompo.resume("runs/never-made"), "resume", "out", "'runs/never-made'", "the folder of a run"),
    (lambda: raycompo.resume(".", rounds="3"), "resume", "rounds", "'3' (a str)", "an integer >= 1 or None"),
    (lambda: raycompo.resume(None), "resume", "out", "None (a NoneType)", "a path"),
    (lambda: raycompo.tune("dro", algorithms="comfedl"), "tune", "algorithms", "'comfedl' (a str)",
     "a list of non-empty strings or None"),
    (lambda: raycompo.tune("dro", samples=0), "tune", "samples", "0 (an int)", "an integer >= 1 or None"),
    (lambda: raycompo.tune(5), "tune", "space", "5 (an int)", "a dict with string keys"),
    (lambda: raycompo.tune("dro", search="random"), "tune", "search", "'random' (a str)", "one of 'optuna', 'grid'"),
    (lambda: raycompo.tune("dro", quiet="no"), "tune", "quiet", "'no' (a str)", "True or False"),
    (lambda: raycompo.plot(5), "plot", "sources", "5 (an int)", "a path (a str or a pathlib.Path) or a list of paths"),
    (lambda: raycompo.plot("runs", x="time"), "plot", "x", "'time' (a str)", "one of 'round', 'wall_time'"),
    (lambda: raycompo.plot([]), "plot", "sources", "[] (a list)", "a list of paths"),
    (lambda: raycompo.task_from_arrays(X, Y, n_clients="2"), "task_from_arrays", "n_clients", "'2' (a str)",
     "an integer >= 1"),
    (lambda: raycompo.task_from_arrays(X, Y, n_clients=2, val_fraction=1.5), "task_from_arrays", "val_fraction",
     "1.5 (a float)", "a number > 0 and < 1"),
    (lambda: raycompo.task_from_arrays(X, Y, n_clients=2, num_classes=1), "task_from_arrays", "num_classes",
     "1 (an int)", "an integer >= 2 or None"),
    (lambda: raycompo.task_from_arrays(X, Y, n_clients=2, loss="mse"), "task_from_arrays", "loss", "'mse' (a str)",
     "a function or None"),
    (lambda: raycompo.task_from_clients([PAIR], partition_seed="1"), "task_from_clients", "partition_seed",
     "'1' (a str)", "an integer >= 0 or None"),
    (lambda: raycompo.task_from_clients([PAIR, PAIR], name=5), "task_from_clients", "name", "5 (an int)",
     "a non-empty string"),
]


@pytest.mark.parametrize("call,function,name,got,accepts", CASES, ids=[f"{c[1]}-{c[2]}-{i}" for i, c in enumerate(CASES)])
def test_a_wrong_argument_is_one_config_error_naming_it(call, function, name, got, accepts):
    with pytest.raises(raycompo.ConfigError) as err:
        call()
    msg = str(err.value)
    assert msg.startswith(f"raycompo.{function}: {name} must be "), msg
    assert got in msg and accepts in msg, msg


def test_wrong_arguments_leave_no_folder(tmp_path):
    with pytest.raises(raycompo.ConfigError, match="rounds must be"):
        _run(rounds="5", out=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_numpy_numbers_are_taken_and_recorded_as_numbers(tmp_path):
    result = _run(rounds=np.int64(1), seed=np.int32(0), cpus_per_actor=np.float32(0.5), out=tmp_path / "run")
    cfg = json.loads((tmp_path / "run" / "config.json").read_text())
    assert cfg["rounds"] == 1 and type(cfg["rounds"]) is int and cfg["seed"] == 0 and cfg["cpus_per_actor"] == 0.5
    assert type(result.config["rounds"]) is int


def test_a_config_json_of_the_wrong_types_is_a_config_error(tmp_path):
    folder = tmp_path / "run"
    _run(rounds=1, out=folder)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "seed": "0", "status": "interrupted"}))
    with pytest.raises(raycompo.ConfigError, match=r"the run's configuration: seed must be an integer, got '0'"):
        raycompo.resume(Path(folder), rounds=2)
