"""The simulated system as small parts (issue 32): one clock formula for the clock and every
prediction, NoSystem with System's interface, availability models and selection policies as
plugins of one file, one set of defaults, one list of cost columns, bounded per-client state,
members that go offline mid-round."""

from __future__ import annotations

import inspect
import math
import pickle
import random

import pytest

import raycompo
from raycompo.costs.axes import COST_AXES
from raycompo.costs.budget import BUDGET_KEYS, Budget
from raycompo.costs.exchange import (
    COST_COLUMNS,
    LEDGER_COLUMNS,
    PRIVACY_COLUMNS,
    SYSTEM_COLUMNS,
    ExchangeCost,
)
from raycompo.engine import federation, ledger
from raycompo.errors import ConfigError
from raycompo.system import COLUMNS, PROFILES, NoSystem, System, SystemLike, clock, load_profile
from raycompo.system.availability import DAY_S, Bernoulli, Diurnal
from raycompo.system.profile import Availability, Profile, Selection

D = 1000
FEDAVG = {"n_clients": 40, "clients_per_round": 6, "tau": 2, "max_samples": 60}


def exchange(round_, clients, samples, down, up):
    k = len(clients)
    return ExchangeCost(round_, "local", 0, list(clients), [1] * k, [samples] * k, [down // 4] * k, [up // 4] * k,
                        [down] * k, [up] * k)


def test_one_formula_moves_the_clock_and_the_predictions(monkeypatch):
    s = System(PROFILES["mobile-fastest"], 0, 1000, D, 4 * D)
    d = s.devices.device(7)
    # the docs' formula, by hand from the device's fields
    by_hand = 2 * d.latency + 4000 / d.downlink + 50 * 6 * D / d.flops + 8000 / d.uplink
    assert clock.member_time(s.devices.rates(7), 50, 4000, 8000) == pytest.approx(by_hand, rel=1e-12)
    s.clock.workload = [clock.Workload(50, 4000, 8000)]
    assert s.predict(7) == pytest.approx(by_hand, rel=1e-12)
    s.begin_round(1)
    s.on_exchange(exchange(1, [7], 50, 4000, 8000))
    assert s.now == pytest.approx(by_hand, rel=1e-12)
    # change the formula in its one place: the clock and the predictions both move
    monkeypatch.setattr(clock, "member_time", lambda rates, samples, down, up: 2.5)
    assert s.predict(7) == 2.5 and s.clock.predict_many([7, 8]) == [2.5, 2.5]
    s.on_exchange(exchange(1, [7, 8], 50, 4000, 8000))
    assert s.now == pytest.approx(by_hand + 2.5)


def test_no_system_has_the_interface_and_the_engine_never_asks_which():
    wanted = {name for name, _ in inspect.getmembers(SystemLike) if not name.startswith("_")}
    for cls in (System, NoSystem):
        assert wanted <= {name for name in dir(cls) if not name.startswith("_")}, cls
    source = inspect.getsource(federation)
    assert "isinstance(self.system" not in source and "System)" not in source
    n = NoSystem()
    n.begin_round(1)
    assert n.select(3, 0, lambda m: [1, 2, 3]) == [1, 2, 3] and n.columns() == {} and n.state() is None
    assert n.client_columns([1]) is None


def test_python_and_yaml_share_one_set_of_defaults_and_checks(tmp_path):
    assert Availability("bernoulli").p == Bernoulli.Settings().p == load_profile(
        {"availability": {"kind": "bernoulli"}}).availability.p == 0.5
    assert Availability("diurnal").online_hours == load_profile({"availability": {"kind": "diurnal"}}).availability.online_hours
    assert Selection() == load_profile({}).selection and Selection().max_attempts == 20
    with pytest.raises(ConfigError, match=r"p must be in \[0, 1\], got 1.5"):
        Availability("bernoulli", p=1.5)
    with pytest.raises(ConfigError, match="no client is ever online"):
        Availability("diurnal", p_day=0)
    with pytest.raises(ConfigError, match=r"unknown key\(s\) hours; accepted: kind, online_hours"):
        Availability("diurnal", hours=3)
    with pytest.raises(ConfigError, match=r"max_attempts must be an integer in \[1, 1000\], got 0"):
        Selection(max_attempts=0)
    p = PROFILES["mobile"]
    assert pickle.loads(pickle.dumps(p)) == p


def test_one_list_of_cost_columns_and_a_budget_never_silently_ignored():
    assert ledger.COLUMNS == LEDGER_COLUMNS and COLUMNS == SYSTEM_COLUMNS
    assert set(BUDGET_KEYS) <= set(COST_COLUMNS)
    assert {c for cols in COST_AXES.values() for c in cols} <= set(COST_COLUMNS)
    fed = federation.Federation(raycompo.RunConfig(task="synthetic", algo="fedavg", backend="inline",
                                                   system="uniform", settings=FEDAVG), start=False)
    # every key a budget takes is a column of the rows (epsilon: of a run with client-level DP)
    assert set(BUDGET_KEYS) - set(PRIVACY_COLUMNS) <= set(fed.cost_columns())
    private = federation.Federation(raycompo.RunConfig(task="synthetic", algo="fedavg", backend="inline",
                                                       system="uniform", settings=FEDAVG, dp_clip=1.0, dp_noise=1.0),
                                    start=False)
    assert set(BUDGET_KEYS) <= set(private.cost_columns())
    with pytest.raises(ConfigError, match="budget samples=5: the run's rows have no column 'samples'"):
        Budget({"samples": 5}).reached({"sample": 10, "exchanges": 1})  # a renamed column: an error, not a run


def test_vectorized_availability_answers_bit_for_bit():
    rng = random.Random(3)
    d, b = Diurnal(6, 22, 0.5, 3), Bernoulli(0.3, 60, 2)
    for _ in range(20):
        t = rng.uniform(0, 40 * DAY_S)
        cs = [rng.randrange(10**7) for _ in range(200)]
        assert d.online_many(cs, t) == [d.online(c, t) for c in cs]
        assert b.online_many(cs, t) == [b.online(c, t) for c in cs]
        on = [c for c in cs if d.online(c, t)]
        until = d.online_until_many(on, t)
        assert until == [d.online_until(c, t) for c in on]
        for c, u in zip(on, until):  # online up to the interval's end, offline just after
            assert t <= u <= t + 6 * 3600 and d.online(c, (t + u) / 2) and not d.online(c, u + 1e-3)
    assert all(b.online(5, x) for x in (60.0 * 7, b.online_until(5, 60.0 * 7) - 1e-3)) or not b.online(5, 420.0)


def test_per_client_state_stays_bounded():
    s = System(PROFILES["mobile"], 0, 10**7, D, 4 * D)
    sizes = {}
    for r in range(1, 121):
        s.begin_round(r)
        cohort = s.select(20, 0, lambda m: list(range(m)))
        s.on_exchange(exchange(r, cohort, 10, 4000, 4000))
        s.end_round()
        if r % 10 == 0:
            s.reported()  # an evaluation every 10 rounds
        sizes[r] = len(pickle.dumps(s.state()))
    assert sizes[120] < 1.3 * sizes[40]  # O(window), not O(clients ever touched)
    assert sum(s.counters["selected"].values()) == 10 * 20  # the last window: 10 rounds of 20


def test_a_member_that_goes_offline_before_it_finishes_is_dropped_and_counted(tmp_path):
    trace = tmp_path / "t.csv"
    # 4 equal devices; client 1 goes offline at 0.05 s, before its round (>= 0.1 s of latency) ends
    trace.write_text("client,start_s,end_s\n0,0,1000\n1,0,0.05\n2,0,1000\n3,0,1000\n")
    prof = load_profile({"name": "t", "availability": {"kind": "trace", "path": str(trace)},
                         "selection": {"over_selection": 4 / 3}})
    s = System(prof, 0, 4, D, 4 * D)
    s.begin_round(1)
    cohort = s.select(3, 0, lambda m: pytest.fail("not a plain draw"))
    # equal predictions: without the departure the 3 smallest ids (0, 1, 2) would be kept
    assert cohort == [0, 2, 3]
    assert s.counters["dropped"] == {1: 1} and s.counters["left"] == {1: 1}
    assert s.counters["wasted_s"] == {1: pytest.approx(0.05)} and s.wasted_s == pytest.approx(0.05)
    assert s.dropped_round == 1


def test_uniform_profile_rows_are_unchanged_by_departures():
    """Always online: nobody leaves; the cohorts are the engine's own draws."""
    plain = raycompo.run("synthetic", "fedavg", rounds=2, backend="inline", settings=FEDAVG)
    uniform = raycompo.run("synthetic", "fedavg", rounds=2, backend="inline", settings=FEDAVG, system="uniform")
    for a, b in zip(plain.rows, uniform.rows):
        assert {k: v for k, v in a.items() if k not in ("round_time", "wall_time")} == \
            {k: v for k, v in b.items() if k not in ("round_time", "wall_time", *COLUMNS)}


AVAILABILITY_PLUGIN = '''
import math
from dataclasses import dataclass, field

from raycompo.system.availability import AvailabilityModel


class EvenOnly(AvailabilityModel):
    """Even clients always online, odd ones never."""

    name = "even-only"

    @dataclass(frozen=True)
    class Settings:
        parity: int = 0

    def __init__(self, settings, seed, n_clients):
        self.parity = settings.parity

    def online(self, c, t):
        return c % 2 == self.parity

    def next_online(self, c, t):
        return t if self.online(c, t) else None

    def online_until(self, c, t):
        return math.inf if self.online(c, t) else t
'''

POLICY_PLUGIN = '''
from dataclasses import dataclass

from raycompo.system.selection import SelectionPolicy


class FirstOnline(SelectionPolicy):
    """The first m online candidates drawn, nothing dropped."""

    name = "first-online"

    @dataclass(frozen=True)
    class Settings:
        pass

    def select(self, m, view):
        candidates, start = view.candidates(m, m, 0)
        view.wait_until(start)
        return view.keep(sorted(candidates))
'''


def test_availability_model_and_selection_policy_as_plugins_of_one_file(tmp_path):
    (tmp_path / "even_only.py").write_text(AVAILABILITY_PLUGIN)
    (tmp_path / "first_online.py").write_text(POLICY_PLUGIN)
    (tmp_path / "p.yaml").write_text("availability: {kind: even_only.py:EvenOnly, parity: 0}\n"
                                     "selection: {policy: first_online.py:FirstOnline}\n")
    out = tmp_path / "run"
    result = raycompo.run("synthetic", "fedavg", rounds=2, backend="inline", settings=FEDAVG,
                          system=str(tmp_path / "p.yaml"), out=str(out))
    assert result.status == "completed" and result.rows[-1]["dropped"] == 0 and result.rows[-1]["sim_time"] > 0
    clients = result.clients
    chosen = clients[clients["selected"] > 0]["client"].unique()
    assert len(chosen) > 0 and all(c % 2 == 0 for c in chosen)  # only online (even) clients joined
    with pytest.raises(ConfigError, match=r"kind must be one of always, bernoulli, diurnal, trace, got "
                                          r"'even_only.py:EvenOnly'; your own class"):
        load_profile(str(tmp_path / "p.yaml"))  # the system layer alone knows only its built-ins
    with pytest.raises(ConfigError, match="unknown key"):
        raycompo.run("synthetic", "fedavg", rounds=1, backend="inline", settings=FEDAVG,
                     system=str(_write(tmp_path / "q.yaml", "availability: {kind: even_only.py:EvenOnly, p: 1}\n")))


def _write(path, text):
    path.write_text(text)
    return path


def test_profiles_built_in_python_are_profiles_like_any_other():
    p = Profile("py", PROFILES["mobile"].devices, Availability("bernoulli", p=0.5, slot_s=60.0),
                Selection(over_selection=1.5, deadline_s=100.0))
    s = System(p, 0, 10**6, D, 4 * D)
    s.begin_round(1)
    cohort = s.select(10, 0, lambda m: pytest.fail("not a plain draw"))
    assert len(cohort) == 10 and all(s.availability.online(c, s.now) for c in cohort)
    assert p.record()["availability"] == {"kind": "bernoulli", "p": 0.5, "slot_s": 60.0}
    assert not math.isnan(s.columns()["wasted_s"])


def test_an_installed_package_registers_an_availability_model_by_name(tmp_path, monkeypatch):
    pkg = tmp_path / "mylab_sys"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "avail.py").write_text(AVAILABILITY_PLUGIN)
    info = tmp_path / "mylab_sys-1.0.dist-info"  # as pip would leave it
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mylab_sys\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[raycompo.availability]\neven-only = mylab_sys.avail:EvenOnly\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from raycompo.configuration import plugins

    assert "even-only" in plugins.registered("availability") and "diurnal" in plugins.registered("availability")
    profile = load_profile({"name": "ep", "availability": {"kind": "even-only", "parity": 1}}, resolve=plugins.load)
    assert profile.availability.model.__name__ == "EvenOnly" and profile.availability.parity == 1
    s = System(profile, 0, 100, D, 4 * D)
    s.begin_round(1)
    assert all(c % 2 == 1 for c in s.select(5, 0, lambda m: pytest.fail("not a plain draw")))
