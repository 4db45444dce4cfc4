"""The round loop (engine/loop.py): several rounds per call to a driver actor, never past
a checkpoint boundary, every row passed on in order, stopping at a divergence."""

from __future__ import annotations

import dataclasses

from raycompo.engine.loop import MAX_ROUNDS_PER_CALL, run_rounds
from raycompo.watch.observers import Observer


class FakeDriver:
    """Rounds that take no time; records how many rounds each call asked for."""

    def __init__(self, diverge_at: int | None = None):
        self.round, self.calls, self.diverge_at = 0, [], diverge_at

    def initial_row(self):
        return {"round": 0}

    def run_rounds(self, count):
        self.calls.append(count)
        rows = []
        for _ in range(count):
            self.round += 1
            rows.append({"round": self.round, "diverged": self.round == self.diverge_at})
            if rows[-1]["diverged"]:
                break
        return rows


@dataclasses.dataclass
class Seen(Observer):
    rounds: list = dataclasses.field(default_factory=list)

    def on_row(self, row):
        self.rounds.append(row["round"])


def test_one_round_per_call_by_default():
    fed, seen, rows = FakeDriver(), Seen(), []
    assert run_rounds(fed, 7, seen, rows) == "completed"
    assert fed.calls == [1] * 7 and seen.rounds == list(range(8))


def test_batched_calls_stop_at_checkpoint_boundaries():
    fed, seen, rows = FakeDriver(), Seen(), []
    assert run_rounds(fed, 237, seen, rows, boundary=10, call_seconds=1.0) == "completed"
    assert seen.rounds == list(range(238)) and [r["round"] for r in rows] == seen.rounds
    ends = [sum(fed.calls[: i + 1]) for i in range(len(fed.calls))]
    assert all((end - 1) // 10 == (end - c) // 10 for end, c in zip(ends, fed.calls))  # no call crosses a multiple of 10
    assert 10 in ends and 230 in ends and ends[-1] == 237
    assert max(fed.calls) == 10 and len(fed.calls) < 40  # rounds grouped, not one call each
    big, _rows = FakeDriver(), []
    run_rounds(big, 500, Seen(), _rows, boundary=None, call_seconds=1.0)
    assert max(big.calls) == MAX_ROUNDS_PER_CALL


def test_divergence_inside_a_batched_call_stops_the_loop():
    fed, seen, rows = FakeDriver(diverge_at=13), Seen(), []
    assert run_rounds(fed, 100, seen, rows, boundary=50, call_seconds=1.0) == "diverged"
    assert rows[-1]["round"] == 13 and seen.rounds == list(range(14))
