"""`OracleMeter` (problems/oracle.py) counts a chunk's calls per row as one array: the same
counts as adding them row by row, handed out as Python ints."""

from __future__ import annotations

from raycompo.problems.oracle import OracleMeter


def test_meter_adds_per_row_counts_and_spreads_a_single_count():
    meter = OracleMeter(4)
    meter.add([1, 2, 3, 4])
    meter.add([10, 10])  # fewer counts than rows: the first rows
    meter.add([1, 1, 1, 1, 99])  # more: the rows' own only
    meter.add(6)  # one count for the whole chunk: 6 = 4 x 1 + 2, the remainder on the first rows
    assert meter.per_row() == [1 + 10 + 1 + 2, 2 + 10 + 1 + 2, 3 + 1 + 1, 4 + 1 + 1]
    assert all(type(c) is int for c in meter.per_row()) and meter.total == sum(meter.per_row())
    meter.row = 2  # a per-client call inside the chunk, counted on its row
    meter.add(5)
    assert meter.per_row()[2] == 10


def test_meter_of_a_single_member_sums_every_count():
    meter = OracleMeter()
    meter.add(3)
    meter.add([1, 2, 3])
    assert meter.per_row() == [9] and meter.total == 9
