"""The clock and the deadline policy (raycompo/system/clock.py, deadline.py, simulator.py),
driven by ExchangeCost records built here: times against hand-computed formulas, the kept
clients are the fastest predicted, waits and errors."""

from __future__ import annotations

import math

import pytest

from raycompo.costs.exchange import DROPPED_COLUMNS, ExchangeCost
from raycompo.errors import ConfigError
from raycompo.system import PROFILES, System, load_profile
from raycompo.system.deadline import candidates_for, choose
from raycompo.system.profile import Availability, DeviceClass, Devices, Profile, Selection, Spread

D = 1000  # model parameters


def exchange(round_, index, clients, samples, down, up, phase="local"):
    k = len(clients)
    return ExchangeCost(round_, phase, index, list(clients), [1] * k, [samples] * k, [down // 4] * k, [up // 4] * k,
                        [down] * k, [up] * k)


def plain_draw(m):
    return list(range(m))


def test_uniform_round_time_is_the_formula():
    # uniform: 1e10 FLOP/s, 1.25e6 B/s both ways, 0.05 s one way; a sample is 6 d FLOP
    s = System(PROFILES["uniform"], 0, 10, D, 4 * D)
    s.begin_round(1)
    assert s.select(3, 0, plain_draw) == [0, 1, 2]
    s.on_exchange(exchange(1, 0, [0, 1, 2], samples=50, down=4000, up=8000))
    s.end_round()
    expect = 2 * 0.05 + 4000 / 1.25e6 + 50 * 6 * D / 1e10 + 8000 / 1.25e6
    assert s.columns() == {"sim_time": pytest.approx(expect, rel=1e-12), "dropped": 0, "wasted_s": 0.0,
                           **dict.fromkeys(DROPPED_COLUMNS, 0.0)}  # nobody dropped: nothing charged
    s.begin_round(2)
    s.on_exchange(exchange(2, 0, [4], samples=0, down=0, up=0))
    assert s.now == pytest.approx(expect + 0.1)


def test_feddro_i_plus_one_barriers_each_pay_latency():
    """FedDRO's round: a start exchange and I steps sharing small y-bar vectors: I + 1
    latencies both ways, however few bytes."""
    s = System(PROFILES["uniform"], 0, 4, D, 4 * D)
    steps, p = 5, 10  # local steps I, embedding size
    s.begin_round(1)
    s.on_exchange(exchange(1, 0, range(4), samples=8, down=4 * D, up=4 * p))
    for j in range(1, steps + 1):
        up = 4 * D + 4 * p if j == steps else 4 * p
        s.on_exchange(exchange(1, j, range(4), samples=8, down=4 * p, up=up))
    bw, sample = 1.25e6, 6 * D / 1e10
    expect = (steps + 1) * (0.1 + 8 * sample) + (4 * D + steps * 4 * p) / bw + ((steps + 1) * 4 * p + 4 * D) / bw
    assert s.now == pytest.approx(expect, rel=1e-12)
    assert (steps + 1) * 0.1 / s.now > 0.9  # latency dominates: cheap in bytes, not in time


def hetero_profile(**sel):
    return Profile("hetero", PROFILES["mobile"].devices, Availability(), Selection(**sel))


def test_exchange_time_is_the_slowest_member():
    s = System(hetero_profile(), 0, 100, D, 4 * D)
    s.begin_round(1)
    cohort = s.select(5, 0, plain_draw)  # plain: always online, no over-selection
    s.on_exchange(exchange(1, 0, cohort, samples=100, down=40000, up=40000))
    times = []
    for c in cohort:
        d = s.devices.device(c)
        times.append(2 * d.latency + 40000 / d.downlink + 40000 / d.uplink + 100 * 6 * D / d.flops)
    assert s.now == pytest.approx(max(times), rel=1e-12)
    assert len(set(times)) == 5


def test_over_selection_keeps_the_fastest_predicted():
    s = System(hetero_profile(over_selection=2.0), 0, 10**6, D, 4 * D)
    wasted = 0.0
    for r in range(1, 6):
        s.begin_round(r)
        before = {c: v for c, v in s.counters["drawn"].items()}
        cohort = s.select(10, 0, plain_draw)
        assert len(cohort) == 10 == len(set(cohort)) and cohort == sorted(cohort)
        drawn = [c for c, v in s.counters["drawn"].items() if v != before.get(c, 0)]
        assert len(drawn) == 20  # ceil(2.0 * 10) candidates, all online
        dropped = set(drawn) - set(cohort)
        assert s.dropped_round == 10
        close = max(s.predict(c) for c in cohort)  # the round closes at the 10th finish
        assert close <= min(s.predict(c) for c in dropped)
        wasted += len(dropped) * close  # each dropped client worked until then
        s.on_exchange(exchange(r, 0, cohort, samples=200 * r, down=40000, up=40000))
        s.end_round()
    assert s.wasted_s == pytest.approx(wasted, rel=1e-12) and sum(s.counters["dropped"].values()) == 50


def test_choose_and_candidates_for():
    pred = {5: 3.0, 1: 1.0, 9: 2.0, 2: 2.0}
    c = choose(pred, 2, None)
    assert (c.kept, c.dropped, c.close_s) == ([1, 2], [5, 9], 2.0)  # tie at 2.0 broken by id
    assert choose(pred, 2, 1.5).kept == []  # only one within the deadline: abandoned
    assert choose(pred, 3, 2.0).kept == [1, 2, 9]
    assert candidates_for(10, 1.3, 10**6) == 13 and candidates_for(10, 1.3, 11) == 11
    assert candidates_for(3, 1.0, 5) == 3


def test_a_deadline_no_client_meets_is_an_error():
    s = System(hetero_profile(over_selection=1.5, deadline_s=0.01, max_attempts=3), 0, 1000, D, 4 * D)
    s.begin_round(1)
    with pytest.raises(ConfigError, match=r"abandoned 3 times in a row.*deadline_s=0.01 s.*Raise selection.deadline_s"):
        s.select(4, 0, plain_draw)
    assert s.now == pytest.approx(3 * 0.01)  # each abandoned attempt cost the deadline
    assert s.dropped_round == 3 * 6


def test_an_abandoned_attempt_then_a_kept_cohort(tmp_path):
    # two device classes: most are too slow for the deadline, a few fast ones make it; 30
    # candidates hold 3 fast ones in about 1 attempt of 5 (seed 0: the first is abandoned)
    dev = Devices(classes=(DeviceClass("slow", 0.95, 1e6),
                           DeviceClass("fast", 0.05, 1e12)),
                  latency_s=Spread(0.0))
    s = System(Profile("d", dev, Availability(), Selection(over_selection=10, deadline_s=1.0, max_attempts=50)),
               0, 10**5, D, 4 * D)
    s.workload[0].samples = 1000  # 1000 samples: 6 s on a slow device, 6 us on a fast one
    s.begin_round(1)
    cohort = s.select(3, 0, plain_draw)
    assert len(cohort) == 3 and all(s.devices.device(c).cls == "fast" for c in cohort)
    # each abandoned attempt cost the deadline and dropped all 30 candidates; the kept one 27
    abandoned = round(s.now / 1.0)
    assert abandoned >= 1 and s.now == abandoned * 1.0
    assert s.dropped_round == 30 * abandoned + 27


def test_offline_clients_of_a_full_participation_round_are_waited_for(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("client,start_s,end_s\n0,0,1000\n1,100,1000\n2,0,1000\n")
    prof = load_profile({"name": "t", "availability": {"kind": "trace", "path": str(trace)}})
    s = System(prof, 0, 3, D, 4 * D)
    s.begin_round(1)
    s.on_exchange(exchange(1, 0, [0, 1, 2], samples=0, down=0, up=0))
    assert s.now == pytest.approx(100 + 0.1)  # client 1 came online at 100 s
    assert s.counters["waited_s"] == {1: pytest.approx(100.0)}
    s.now = 2000.0  # every interval is over, no period: nobody comes back
    with pytest.raises(ConfigError, match="client 0 is never online again after simulated time 2000 s"):
        s.on_exchange(exchange(1, 1, [0, 1, 2], samples=0, down=0, up=0))


def test_a_cohort_is_drawn_from_online_clients_or_waits_for_check_ins(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("client,start_s,end_s\n" + "".join(f"{c},{0 if c < 3 else 500},2000\n" for c in range(10)))
    prof = load_profile({"name": "t", "availability": {"kind": "trace", "path": str(trace)},
                         "selection": {"over_selection": 1.0, "deadline_s": 100}})
    s = System(prof, 0, 10, D, 4 * D)
    s.begin_round(1)
    assert set(s.select(3, 0, plain_draw)) == {0, 1, 2} and s.now == 0.0  # the only ones online at 0
    s.begin_round(2)
    cohort = s.select(5, 0, plain_draw)
    assert len(cohort) == 5 and s.now == 500.0  # waited for two more to check in
    s.now = 5000.0
    s.begin_round(3)
    with pytest.raises(ConfigError, match=r"needs 2 clients, but of the 10 drawn .* only 0 are ever online"):
        s.select(2, 0, plain_draw)


def test_state_round_trip_continues_the_same_clock():
    def rounds(s, r0, r1):
        out = []
        for r in range(r0, r1):
            s.begin_round(r)
            cohort = s.select(8, 0, plain_draw)
            s.on_exchange(exchange(r, 0, cohort, samples=10 * r, down=40000, up=4000 * r))
            s.end_round()
            out.append((cohort, s.columns()))
        return out

    prof = PROFILES["mobile"]
    ref = System(prof, 7, 10**6, D, 4 * D)
    full = rounds(ref, 1, 7)
    a = System(prof, 7, 10**6, D, 4 * D)
    first = rounds(a, 1, 4)
    b = System(prof, 7, 10**6, D, 4 * D)
    b.load(a.state())
    assert first + rounds(b, 4, 7) == full
    touched = sorted({c for cohort, _ in full for c in cohort})
    assert b.client_columns(touched) == ref.client_columns(touched)
    assert full[-1][1]["sim_time"] > 0 and not math.isnan(full[-1][1]["wasted_s"])
    # the checkpoint's keys are those it always had (older checkpoints load), each part's own state inside
    st = a.state()
    assert set(st) == {"profile", "profile_record", "now", "wasted_s", "workload", "dropped_costs", "counters"}
    assert {k: st[k] for k in ("now", "workload")} == a.clock.state() and st["wasted_s"] == a.totals.state()["wasted_s"]
    clock = System(prof, 7, 10**6, D, 4 * D).clock
    clock.load(a.clock.state())
    assert (clock.now, clock.workload) == (a.clock.now, a.clock.workload)
    with pytest.raises(ConfigError, match=r"taken with profile 'mobile' and this run has profile 'uniform', which "
                                          r"differ: name 'mobile' there, 'uniform' here; availability.kind 'diurnal' "
                                          r"there, 'always' here"):
        System(PROFILES["uniform"], 7, 10**6, D, 4 * D).load(a.state())
