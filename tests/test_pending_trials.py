"""tune/pending.py: Tune keeps as many trials pending as the cluster runs at once, so their
actors start together (with a searcher it kept one)."""

import os

import pytest

from raycompo.tune.pending import ENV, pending_trials, trials_at_once


@pytest.mark.parametrize("bundles, resources, expected", [
    ([{"CPU": 1.0}], {"CPU": 2.0}, 2),  # an inline trial on this machine's 2 CPUs
    ([{"CPU": 0.5}, {"CPU": 0.5, "GPU": 0.25}], {"CPU": 4.0, "GPU": 1.0}, 4),
    ([{"CPU": 0.5}, {"CPU": 0.5, "GPU": 0.3}], {"CPU": 16.0, "GPU": 1.0}, 3),  # the GPU binds
    ([{"CPU": 0.1}, {"CPU": 0.1}, {"CPU": 0.1}], {"CPU": 2.0}, 6),  # 0.3 a trial: 6.67
    ([{"CPU": 3.0}], {"CPU": 2.0}, 1),  # never below one
    ([{"CPU": 1.0, "GPU": 1.0}], {"CPU": 8.0}, 1),  # no GPU at all (refused before, by check_resources)
    ([{"CPU": 1.0, "GPU": 0.0}], {"CPU": 3.0}, 3),  # a zero need binds nothing
])
def test_trials_at_once(bundles, resources, expected):
    assert trials_at_once(bundles, resources) == expected


def test_pending_trials_sets_tunes_variable_within_the_block_only(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    with pending_trials(3):
        assert os.environ[ENV] == "3"
    assert ENV not in os.environ
    with pytest.raises(RuntimeError):  # restored after an error too
        with pending_trials(2):
            raise RuntimeError("a failed fit")
    assert ENV not in os.environ


def test_blocks_open_at_once_share_the_first_value_and_the_last_removes_it(monkeypatch):
    """Two sweeps in threads of one process: the variable stays set while either runs."""
    monkeypatch.delenv(ENV, raising=False)
    first, second = pending_trials(2), pending_trials(5)
    first.__enter__()
    second.__enter__()
    assert os.environ[ENV] == "2"
    first.__exit__(None, None, None)
    assert os.environ[ENV] == "2"  # the second sweep's Tune may still read it
    second.__exit__(None, None, None)
    assert ENV not in os.environ


def test_a_users_own_setting_is_kept(monkeypatch):
    monkeypatch.setenv(ENV, "7")
    with pending_trials(2):
        assert os.environ[ENV] == "7"
    assert os.environ[ENV] == "7"


def test_tunes_controller_reads_it_for_a_searcher(monkeypatch):
    """What the sweep relies on: with a searcher, Tune keeps one trial pending unless told
    (so a second trial's actor started only after the first's), and within the block `n`."""
    from ray.tune.execution.tune_controller import _get_max_pending_trials
    from ray.tune.search import SearchGenerator

    from raycompo.tune.searchers import ListSearcher

    monkeypatch.delenv(ENV, raising=False)
    search = SearchGenerator(ListSearcher([{"lr": 0.1}, {"lr": 0.2}], metric="val_loss", mode="min"))
    assert _get_max_pending_trials(search) == 1
    with pending_trials(2):
        assert _get_max_pending_trials(search) == 2
