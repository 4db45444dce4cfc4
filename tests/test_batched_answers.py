"""A user's batched phase that answers the wrong number of rows fails the run with a message
that names the phase, the key and the shapes (before, a row too few or too many was summed or
dropped, and the run completed with other numbers); a `Shares` built wrongly is refused where
it is built; a failed run's folder keeps the whole traceback (error.txt) and the command line
points at the user's own file and line."""

import json
import textwrap

import pytest
import torch

import raycompo
from raycompo.algorithms.client_rows import positions
from raycompo.runfolder.failure import ERROR_FILE, user_frames

PLUGIN = textwrap.dedent('''
    import os

    import torch

    import raycompo
    from raycompo.algorithms.fedavg import FedAvg


    class Rows(FedAvg):
        """FedAvg whose batched local phase answers `cut` rows fewer (negative: more) than
        its chunk's members."""
        name = "rows"
        cut = 0

        @raycompo.batched_phase("local")
        def batched_local(self, cb, states, payload):
            out, states = FedAvg.batched_local(self, cb, states, payload)
            if not self.cut:
                return out, states
            cut = (lambda v: v[:-self.cut]) if self.cut > 0 else (lambda v: torch.cat([v, v[:-self.cut]]))
            return {key: cut(v) if isinstance(v, torch.Tensor) else v for key, v in out.items()}, states


    class TooFew(Rows):
        name = "too-few"
        cut = 1
        batched_local = Rows.batched_local


    class TooMany(Rows):
        name = "too-many"
        cut = -1
        batched_local = Rows.batched_local


    class Summed(FedAvg):
        """Sums its members instead of answering their rows."""
        name = "summed"

        @raycompo.batched_phase("local")
        def batched_local(self, cb, states, payload):
            out, states = FedAvg.batched_local(self, cb, states, payload)
            return {key: v.sum(0) if isinstance(v, torch.Tensor) else v for key, v in out.items()}, states


    class NoPair(FedAvg):
        name = "no-pair"

        @raycompo.batched_phase("local")
        def batched_local(self, cb, states, payload):
            FedAvg.batched_local(self, cb, states, payload)


    class FailsOnce(FedAvg):
        """Fails in round 2 while the file named by RAYCOMPO_TEST_FAIL exists."""
        name = "fails-once"

        def server_round(self, ctx, w, state):
            if ctx.round == 2 and os.path.exists(os.environ.get("RAYCOMPO_TEST_FAIL", "")):
                raise RuntimeError("the user's own mistake")
            return FedAvg.server_round(self, ctx, w, state)
''')

SETTINGS = {"n_clients": 12, "clients_per_round": 6, "tau": 2, "batch_size": 10}


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    path = tmp_path_factory.mktemp("user") / "rows.py"
    path.write_text(PLUGIN)
    return path


@pytest.mark.parametrize("cls, shown", [("TooFew", "a tensor of shape (5, "), ("TooMany", "a tensor of shape (7, "),
                                        ("Summed", "a tensor of shape (")])
def test_a_batched_phase_answering_other_rows_than_its_members_fails_the_run(plugin, tmp_path, cls, shown):
    out = tmp_path / "run"
    with pytest.raises(ValueError) as caught:
        raycompo.run("synthetic", f"{plugin}:{cls}", rounds=2, settings=SETTINGS, backend="inline", vectorize="on",
                     out=out)
    message = str(caught.value)
    assert f"batched phase 'local' ({cls if cls == 'Summed' else 'Rows'}.batched_local) answered 'nw'" in message
    assert shown in message and "for a chunk of 6 clients" in message and "a (6, ...) tensor" in message
    stored = json.loads((out / "config.json").read_text())
    assert stored["status"] == "failed" and "answered 'nw'" in stored["error"]


def test_a_population_chunk_answering_a_row_too_few_fails_its_trials(tmp_path, monkeypatch):
    """A population's chunk holds several trials' rows (engine/population.py `run_chunk`):
    checked against all of them."""
    from raycompo.algorithms.fedavg import FedAvg

    real = FedAvg.batched_local

    def one_row_short(self, cb, states, payload):
        out, states = real(self, cb, states, payload)
        return {key: v[:-1] if isinstance(v, torch.Tensor) else v for key, v in out.items()}, states

    monkeypatch.setattr(FedAvg, "batched_local", one_row_short)
    with pytest.raises(ValueError) as caught:
        raycompo.run("synthetic", "fedavg", rounds=2, settings=SETTINGS, backend="inline", vectorize="on",
                     out=tmp_path / "run", seeds=[0, 1])
    k = int(str(caught.value).split("for a chunk of ")[1].split()[0])
    assert k > 6 and f"with a tensor of shape ({k - 1}, " in str(caught.value)  # both trials' members
    for seed in (0, 1):
        assert json.loads((tmp_path / "run" / f"seed-{seed}" / "config.json").read_text())["status"] == "failed"


def test_a_batched_phase_that_returns_no_pair_is_named(plugin, tmp_path):
    with pytest.raises(TypeError, match=r"batched phase 'local' \(NoPair.batched_local\) returned a NoneType: it "
                                        r"returns a pair \(contributions, states\)"):
        raycompo.run("synthetic", f"{plugin}:NoPair", rounds=1, settings=SETTINGS, backend="inline", vectorize="on",
                     out=tmp_path / "run")


def test_the_same_plugin_answering_its_rows_runs_as_fedavg(plugin, tmp_path):
    """The check refuses nothing that is right: 0 rows cut is FedAvg's own answer."""
    mine = raycompo.run("synthetic", f"{plugin}:Rows", rounds=2, settings=SETTINGS, backend="inline", vectorize="on",
                        out=tmp_path / "a")
    fedavg = raycompo.run("synthetic", "fedavg", rounds=2, settings=SETTINGS, backend="inline", vectorize="on",
                          out=tmp_path / "b")
    assert mine.status == "completed"
    # to float rounding: the built-in evaluates batched, a user's subclass client by client
    assert mine.metrics["train_loss"].tolist() == pytest.approx(fedavg.metrics["train_loss"].tolist(), rel=1e-6)
    assert mine.metrics["val_acc"].tolist() == fedavg.metrics["val_acc"].tolist()


def test_shares_are_refused_where_they_are_built():
    with pytest.raises(TypeError, match="values is one 1-D tensor.*got list"):
        raycompo.Shares([0, 1], [0.5, 0.5], [1, 1])
    with pytest.raises(TypeError, match=r"got shape \(2, 1\)"):
        raycompo.Shares([0, 1], torch.zeros(2, 1), [1, 1])
    with pytest.raises(ValueError, match=r"at least 0, got \[-1\]"):
        raycompo.Shares([0, 1], torch.zeros(2), [3, -1])
    with pytest.raises(ValueError, match="2 clients, 1 lengths"):
        raycompo.Shares([0, 1], torch.zeros(2), [2])


def test_a_missing_id_names_the_ids_held_and_any_repeated():
    with pytest.raises(KeyError, match=r"no answer from client\(s\) \[18\]: not among the 3 held \(\[4, 7, 4\].*"
                                       r"client\(s\) \[4\] appear more than once"):
        positions(__import__("numpy").array([4, 7, 4]), __import__("numpy").array([7, 18]))
    shares = raycompo.Shares([3, 5], torch.arange(3.0), [2, 1])
    with pytest.raises(KeyError, match=r"no answer from client\(s\) \[9\]: not among the 2 held"):
        shares.cat([5, 9])


def test_user_frames_are_the_frames_outside_raycompo_and_python():
    import threading

    import raycompo.engine.runner as runner

    text = "\n".join([
        'Traceback (most recent call last):',
        f'  File "{runner.__file__}", line 10, in run',
        '  File "/home/me/my_algo.py", line 22, in server_round',
        f'  File "{threading.__file__}", line 5, in run',
        '  File "<frozen runpy>", line 1, in _run_code',
        '  File "/home/me/my_algo.py", line 40, in batched_local',
        '  File "/home/me/my_algo.py", line 22, in server_round',
    ])
    assert user_frames(text) == ["/home/me/my_algo.py:40 in batched_local", "/home/me/my_algo.py:22 in server_round"]
    assert user_frames(text, most=1) == ["/home/me/my_algo.py:22 in server_round"]


def test_the_command_line_points_at_the_users_line_and_a_resume_clears_the_failure(plugin, tmp_path, capsys,
                                                                                 monkeypatch):
    """`python -m raycompo.run` of a plugin that fails: its one line, the user's file and
    line, and error.txt with the whole traceback; resumed once the cause is gone, the run
    completes and neither error.txt nor config.json's error is left."""
    from raycompo.run import main

    marker = tmp_path / "fail"
    marker.write_text("")
    monkeypatch.setenv("RAYCOMPO_TEST_FAIL", str(marker))
    out = tmp_path / "run"
    argv = ["--task", "synthetic", "--algo", f"{plugin}:FailsOnce", "--rounds", "3", "--backend", "inline", "--quiet",
            "--checkpoint-every", "1", "--set", *[f"{k}={v}" for k, v in SETTINGS.items()]]
    assert main([*argv, "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "run failed: RuntimeError: the user's own mistake; continue with:" in err
    line = next(n for n, text in enumerate(PLUGIN.splitlines(), 1) if "the user's own mistake" in text)
    assert f"  at {plugin}:{line} in server_round" in err
    assert f"  the whole traceback: {out / ERROR_FILE}" in err
    assert "RuntimeError: the user's own mistake" in (out / ERROR_FILE).read_text()
    assert json.loads((out / "config.json").read_text())["error"] == "the user's own mistake"

    marker.unlink()
    assert main(["--resume", str(out), "--quiet"]) == 0
    stored = json.loads((out / "config.json").read_text())
    assert stored["status"] == "completed" and "error" not in stored and not (out / ERROR_FILE).exists()


def test_a_batched_phase_without_its_client_phase_is_refused_where_the_class_is_defined():
    """It was accepted and never ran (the engine runs a batched phase in place of its client phase)."""
    from raycompo.algorithms.fedavg import FedAvg

    with pytest.raises(TypeError, match=r"Orphan: batched phase\(s\) 'locl' without a client phase of that name.*"
                                        r"@raycompo.client_phase\('locl'\)"):
        class Orphan(FedAvg):
            @raycompo.batched_phase("locl")
            def batched_local(self, cb, states, payload):
                return FedAvg.batched_local(self, cb, states, payload)
