"""`python -m raycompo.bench recovery` gives a timeline that adds up: rows timed one round per
driver call (a run otherwise takes several rounds per call and its rows arrive at once, which
once made this benchmark print a normal round of 0 s and a negative restart)."""

from __future__ import annotations

import re

import pytest

from raycompo.bench.recovery import main
from raycompo.engine import runner

pytestmark = pytest.mark.slow  # every test here: see docs/development.md


def test_recovery_timeline_is_per_round_and_the_rows_match(ray_session, capsys):
    before = runner.ROUNDS_CALL_SECONDS
    assert main(["--rounds", "8", "--kill-after", "5", "--checkpoint-every", "4"]) == 0
    out = capsys.readouterr().out
    assert runner.ROUNDS_CALL_SECONDS == before  # the benchmark's setting did not leak

    def seconds(label: str) -> float:
        found = re.search(rf"{re.escape(label)}\s+(-?[\d.]+) s", out)
        assert found, (label, out)
        return float(found[1])

    assert seconds("normal round:") > 0
    assert seconds("detection (kill -> failure seen):") >= 0
    assert seconds("restart + restore + first replayed round:") > 0
    assert "rounds replayed: 1 (rounds 5..5, after the checkpoint of round 4)" in out
    assert "faulted rows == unfaulted rows: max relative difference 0.0e+00" in out
