"""A chunk's draws counted by a `DrawJournal` (tasks/draw_journal.py) leave every client
exactly what `ClientData.count_draw` leaves: its samples read and its remembered draws, in
order, whatever comes between (a draw repeated, a second size, a per-client draw, a new
round, the next exchange's chunk of the same clients, a round longer than DRAWS_KEPT)."""

from __future__ import annotations

import random

import torch

from raycompo.engine.host import new_rounds
from raycompo.tasks.base import DRAWS_KEPT, ClientData, count_draws
from raycompo.tasks.draw_journal import DrawJournal


def clients(sizes: list[int]) -> list[ClientData]:
    return [ClientData(i, torch.zeros(n, 2), torch.zeros(n), torch.zeros(1, 2), torch.zeros(1)) for i, n in
            enumerate(sizes)]


def seed_of(cid: int, step: int, stream: int) -> int:
    """A distinct seed per (client, step, stream), as the contexts' are."""
    return (cid * 1_000_003 + step * 101 + stream) * 7919 % 2**62


def draw_rows(sizes: list[int], size: int | None) -> list[int]:
    return list(sizes) if size is None else [min(n, size) for n in sizes]


def run(ops: list[tuple], sizes: list[int], journaled: bool) -> list[tuple[int, list]]:
    """Apply `ops` to a fresh chunk, counted as `CohortBatch._count` counts (with a journal)
    or client by client with `count_draw` (the reference); each client's counters after."""
    datas = clients(sizes)
    journal, claim = None, journaled
    for op in ops:
        if op[0] == "chunk":
            _, step, stream, size = op
            if claim:
                journal, claim = DrawJournal.claim(datas, sizes), False  # None: what is owed handed over
            seeds = [seed_of(d.client_id, step, stream) for d in datas]
            rows = draw_rows(sizes, size)
            if journal is not None:
                if journal.count(step, stream, size, seeds, rows):
                    continue
                journal.materialize()
            if journaled:
                count_draws(datas, seeds, size, rows, sizes)
            else:
                for d, s, n, total in zip(datas, seeds, rows, sizes):
                    d.count_draw(s, None if size is None or size >= total else size, n)
        elif op[0] == "one":  # a per-client draw of one client (e.g. a phase's own batch)
            _, i, step, stream, size = op
            total = sizes[i]
            datas[i].count_draw(seed_of(i, step, stream), None if size is None or size >= total else size,
                                min(total, size or total))
        elif op[0] == "new_round":
            datas[op[1]].new_round()
        elif op[0] == "new_rounds":  # the host's next round for every client
            new_rounds(datas)
        elif op[0] == "exchange" and journaled:  # the phase returns; a next chunk of the same clients claims them
            if journal is not None:  # at its first count (as CohortBatch._count)
                journal.close()
            journal, claim = None, True
    if journaled:
        if journal is not None:
            journal.close()
        points = [d.samples_read for d in datas]
        for owed in {d._journal for d in datas} - {None}:  # the keys still owed, handed over to be compared
            owed.materialize()
        assert [d.samples_read for d in datas] == points  # the points were all handed over at close
    return [(d.samples_read, list(d._drawn)) for d in datas]


def random_ops(rng: random.Random, n_clients: int, length: int) -> list[tuple]:
    ops: list[tuple] = []
    for _ in range(length):
        r = rng.random()
        step, stream = rng.randrange(6), rng.randrange(2)
        size = rng.choice([None, 3, 5, 8, 50])
        if r < 0.7:
            ops.append(("chunk", step, stream, size))
        elif r < 0.8:
            ops.append(("one", rng.randrange(n_clients), step, stream, size))
        elif r < 0.9:
            ops.append(("exchange",))
        elif r < 0.93:
            ops.append(("new_rounds",))
        else:
            ops.append(("new_round", rng.randrange(n_clients)))
    return ops


def test_journal_counts_exactly_as_each_client_would():
    """Random sequences of chunk draws (steps repeated, sizes mixed, some at or above a
    client's n_i), per-client draws and new rounds: the journal's counters equal the
    reference's, client by client, in every case."""
    rng = random.Random(0)
    for case in range(1000):
        sizes = [rng.choice([2, 4, 5, 9, 30]) for _ in range(rng.randrange(1, 7))]
        ops = random_ops(rng, len(sizes), rng.randrange(1, 25))
        assert run(ops, sizes, True) == run(ops, sizes, False), (case, sizes, ops)


def test_journal_counts_a_plain_run_without_a_call_per_step():
    """The usual chunk (distinct steps, one size): the journal holds it to the end, and the
    counts are min(b, n_i) per step, each remembered once."""
    sizes = [4, 10, 20]
    datas = clients(sizes)
    journal = DrawJournal.claim(datas, sizes)
    assert journal is not None and all(d._journal is journal for d in datas)
    for step in range(5):
        assert journal.count(step, 0, 8, [seed_of(i, step, 0) for i in range(3)], draw_rows(sizes, 8))
    assert journal.count(0, 0, 8, [seed_of(i, 0, 0) for i in range(3)], draw_rows(sizes, 8))  # a repeat
    assert journal.holding and [d.samples_read for d in datas] == [0, 0, 0]  # not handed over yet
    journal.close()
    assert [d.samples_read for d in datas] == [5 * 4, 5 * 8, 5 * 8]
    assert [len(d._drawn) for d in datas] == [0, 0, 0] and all(d._journal is journal for d in datas)  # keys owed
    datas[2].new_round()  # its keys forgotten unread
    assert datas[2]._journal is None
    datas[0].count_draw(12345, 8, 4)  # a per-client draw: every key owed handed over first
    assert [len(d._drawn) for d in datas] == [6, 5, 0] and datas[0].samples_read == 24
    assert list(datas[0]._drawn)[0] == (seed_of(0, 0, 0), None, False)  # n_0 = 4 <= 8: all of it, size None
    assert list(datas[1]._drawn)[0] == (seed_of(1, 0, 0), 8, False)
    assert all(d._journal is None for d in datas)


def test_journal_past_draws_kept_lets_go_exactly():
    """More distinct draws than a client remembers: the journal hands over and the rest is
    counted client by client, with the same forgetting of the oldest draws."""
    sizes = [3, 7]
    ops = [("chunk", s, 0, 2) for s in range(DRAWS_KEPT + 10)] + [("chunk", 0, 0, 2), ("chunk", 300, 0, 2)]
    assert run(ops, sizes, True) == run(ops, sizes, False)


def test_journal_claims_only_what_it_can_count_exactly():
    sizes = [4, 5]
    remembered = clients(sizes)
    remembered[1].count_draw(1, 2, 2)  # a draw already remembered this round
    assert DrawJournal.claim(remembered, sizes) is None
    twice = clients(sizes)
    assert DrawJournal.claim([twice[0], twice[0]], [4, 4]) is None  # one object twice in the chunk
    held = clients(sizes)
    assert DrawJournal.claim(held, sizes) is not None
    assert DrawJournal.claim(held, sizes) is None  # already held by another journal

    class Counted(ClientData):
        pass

    other = [Counted(0, torch.zeros(3, 2), torch.zeros(3), torch.zeros(1, 2), torch.zeros(1))]
    assert DrawJournal.claim(other, [3]) is None  # a subclass may count its own way
    assert DrawJournal.claim([], []) is None


def test_a_closed_journal_keeps_no_client_alive():
    """After its phase, a journal owes its clients their keys but holds them weakly: a client
    the data cache lets go of is freed although a chunk-mate still holds the journal."""
    import gc
    import weakref

    sizes = [4, 5]
    datas = clients(sizes)
    journal = DrawJournal.claim(datas, sizes)
    assert journal is not None and journal.count(0, 0, 2, [seed_of(i, 0, 0) for i in range(2)], [2, 2])
    journal.close()
    gone = weakref.ref(datas[0])
    kept = datas[1]
    del datas, journal
    gc.collect()
    assert gone() is None and kept._journal is not None
    kept.count_draw(99, 2, 2)  # the owed keys handed to the client left, then its own draw
    assert kept.samples_read == 4 and list(kept._drawn) == [(seed_of(1, 0, 0), 2, False), (99, 2, False)]
