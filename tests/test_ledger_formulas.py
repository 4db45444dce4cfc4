"""The ledger against the papers' own counts, for every algorithm of
`raycompo.list_algorithms()`: each exchange's per-client samples, values down and values up
equal a formula written here from the algorithm's definition (its paper or baseline), the
settings and the model size d; never read from the ledger. And the batched path
(--vectorize) counts exactly what the per-client path counts.

Conventions of the count (docs/costs.md): a payload is counted whole for each member (a
Python number is one value), a contribution once per draw of the member; samples are
data points drawn (a meta-learning sample is a task; a draw repeated from the same seed in
a round, once); oracle calls are evaluations on one data point each: a forward pass (a
function value) is one, the backward pass of a gradient or Jacobian one more, a
Hessian-vector product one more (a stochastic gradient by backpropagation: 2 per point).
"""

from __future__ import annotations

import pytest

import raycompo
from raycompo.configuration.config import RunConfig
from raycompo.engine.federation import Federation
from tests.damaml_common import TINY
from tests.helpers import SMALL_DRO

ROUNDS = 2
SIZES = {0: 60, 1: 20, 2: 20, 3: 20}
"""Training samples per client of SMALL_DRO (dro-mnist5k): the big client, then three small."""
B = 8
"""The mini-batch size b used for the dro-mnist5k runs (< 20: every client draws b)."""
I = 2  # noqa: E741  (FedDRO's symbol) local steps per averaging / steps per engine round
TAU = 2


def mb(c: int, b: int | None = B) -> int:
    """Samples of one mini-batch of client c: min(b, n_i) (b None: all n_i)."""
    return SIZES[c] if b is None else min(b, SIZES[c])


def dro(algo: str, **settings) -> RunConfig:
    return RunConfig(task="dro-mnist5k", algo=algo, rounds=ROUNDS, backend="inline",
                     settings={**SMALL_DRO, "lr": 0.01, "batch_size": B, **settings})


GRAD = 2
"""Oracle calls of a stochastic gradient (or a Jacobian with its value) per data point:
the forward pass and the backward pass."""


# --- each algorithm: its config and its exchanges, one (phase, samples, down, up, oracle
# --- calls) per exchange in order, each a function of (client, d) -----------------------
def fedavg_like(up_extra: int = 1, reads_per_step: int = 1, full_reads: int = 0):
    """One exchange a round: the model down, the model (+ weights) up, tau local steps (a
    gradient on each batch read), and full-data function values (q-FedAvg's F_k(w))."""
    return lambda r: [("local", lambda c, d: TAU * reads_per_step * mb(c) + full_reads * SIZES[c], lambda c, d: d,
                       lambda c, d: d + up_extra,
                       lambda c, d: GRAD * TAU * reads_per_step * mb(c) + full_reads * SIZES[c])]


def feddro(r):
    # I + 1 exchanges: x-bar down (start), then y-bar (d_g = 1 for KL) with lr, j, last; y up
    # at every local step, x up at the averaging. One b_g per estimate (KL has no h).
    # Oracle calls per point of b_g, eq. (8) and (7): g(x^t) and its Jacobian (2), and
    # g(x^{t-1}) (1) for every estimate but the very first (y^0 = g(x-bar^0): no y^{-1}).
    e = 1
    first = 2 if r == 1 else 3
    out = [("start", lambda c, d: mb(c), lambda c, d: d, lambda c, d: e, lambda c, d: first * mb(c))]
    out += [("step", lambda c, d: mb(c), lambda c, d: e + 3, lambda c, d: e, lambda c, d: 3 * mb(c))] * (I - 1)
    out += [("step", lambda c, d: 0, lambda c, d: e + 3, lambda c, d: d, lambda c, d: 0)]
    return out


def fedavg_co(r):
    # Case I: round 1 shares y-bar^0 (an inner exchange); later rounds each client computes
    # g_k(x-bar) itself (b values). Each local step reads b_g (value and Jacobian: 2b) and,
    # but the last, a fresh b for the next step's y_k = g_k(x_k) (b values): 2 I b samples.
    e = 1
    steps = lambda c, d: I * GRAD * mb(c) + (I - 1) * mb(c)  # noqa: E731
    if r == 1:
        return [("inner", lambda c, d: mb(c), lambda c, d: d, lambda c, d: e, lambda c, d: mb(c)),
                ("local", lambda c, d: (2 * I - 1) * mb(c), lambda c, d: d + 1 + e, lambda c, d: d, steps)]
    return [("local", lambda c, d: 2 * I * mb(c), lambda c, d: d + 1, lambda c, d: d,
             lambda c, d: mb(c) + steps(c, d))]


def mbsgd_co(r):
    # I server steps, each one exchange: (w, j) down, g_k (d_g) and its Jacobian (d_g x d) up
    # (g_k and its Jacobian: 2 calls per point)
    return [("grad", lambda c, d: mb(c), lambda c, d: d + 1, lambda c, d: 1 + d, lambda c, d: GRAD * mb(c))] * I


def unconstrained(r):
    return [("grad", lambda c, d: mb(c), lambda c, d: d + 1, lambda c, d: d, lambda c, d: GRAD * mb(c))] * I


def gcivr(r):
    # step t = 0: a large-batch checkpoint (B = None: all n_i samples); then corrections at
    # (x^t, x^{t-1}) on one mini-batch: w and w_prev down. g and its Jacobian at one point
    # (checkpoint: 2 n_i calls), at both (correction: 4 b)
    checkpoint = ("checkpoint", lambda c, d: SIZES[c], lambda c, d: d + 1, lambda c, d: 1 + d,
                  lambda c, d: GRAD * SIZES[c])
    correction = ("correction", lambda c, d: mb(c), lambda c, d: 2 * d + 1, lambda c, d: 1 + d,
                  lambda c, d: 2 * GRAD * mb(c))
    return [checkpoint, correction] if r == 1 else [correction, correction]


def fastdro(r):
    # per step: (w, j) down, per-sample losses up (b of them), then j and the weights q of
    # every pooled sample (float64, the whole dict to each client: sum_k min(b, n_k)) down
    # (w is not sent again), a gradient up. The gradient is taken on the batch of the losses
    # (no new draw): b values, then 2 b.
    pooled = sum(mb(c) for c in SIZES)
    return [("losses", lambda c, d: mb(c), lambda c, d: d + 1, lambda c, d: mb(c), lambda c, d: mb(c)),
            ("grad", lambda c, d: 0, lambda c, d: 1 + pooled, lambda c, d: d, lambda c, d: GRAD * mb(c))] * I


def pdsgd(r):
    # round 1 starts with log Z (each client's log-mass up); every step: (w, j, log Z) down,
    # the weighted gradient and the new log-mass up
    # (the losses' values weigh the dual step, their gradient the primal: 2 b)
    out = [("log_mass", lambda c, d: 0, lambda c, d: 0, lambda c, d: 1, lambda c, d: 0)] if r == 1 else []
    return out + [("step", lambda c, d: mb(c), lambda c, d: d + 2, lambda c, d: d + 1, lambda c, d: GRAD * mb(c))] * I


def comfedl_lse(r):
    # the lse normalizer: one scalar f_i(w_s) per cohort member first, on the batch of the
    # first local step (b values; that batch is not drawn again: tau b samples in all)
    return [("robust_value", lambda c, d: mb(c), lambda c, d: d, lambda c, d: 1, lambda c, d: mb(c)),
            ("local", lambda c, d: (TAU - 1) * mb(c), lambda c, d: d + 1, lambda c, d: d + 1,
             lambda c, d: GRAD * TAU * mb(c))]


CASES = {
    # algorithm: (config, exchanges of round r)
    "fedavg": (dro("fedavg", tau=TAU), fedavg_like()),  # n_i w_i and n_i up
    "comfedl": (dro("comfedl", tau=TAU, gamma=2.0), fedavg_like()),  # tau b samples per client (the paper's count)
    "comfedl-lse": (dro("comfedl", tau=TAU, gamma=2.0, normalizer="lse"), comfedl_lse),
    "qfedavg": (dro("qfedavg", tau=TAU), fedavg_like(full_reads=1)),  # F_k on all n_i, then tau steps; Delta, h up
    "ditto": (dro("ditto", tau=TAU), fedavg_like(reads_per_step=2)),  # tau global + tau personal steps
    "feddro": (dro("feddro", sync_every=I), feddro),
    "fedavg-co": (dro("fedavg-co", sync_every=I), fedavg_co),
    "mbsgd-co": (dro("mbsgd-co", sync_every=I), mbsgd_co),
    "unconstrained": (dro("unconstrained", sync_every=I), unconstrained),
    "gcivr": (dro("gcivr", sync_every=I), gcivr),
    "fastdro": (dro("fastdro", sync_every=I), fastdro),
    "pdsgd": (dro("pdsgd", sync_every=I), pdsgd),
}


def check(cfg: RunConfig, exchanges, members=None) -> list:
    fed = Federation(cfg)
    seen: list = []
    fed.exchange_listeners.append(seen.append)
    d = fed.w.numel()
    try:
        rows = fed.run_rounds(ROUNDS)
    finally:
        fed.close()
    assert len(rows) == ROUNDS and not rows[-1]["diverged"]
    expected = [(r, e) for r in range(1, ROUNDS + 1) for e in exchanges(r)]
    assert [(x.round, x.phase) for x in seen] == [(r, e[0]) for r, e in expected]
    for x, (r, (phase, samples, down, up, oracle)) in zip(seen, expected):
        clients = x.clients if members is None else members(x)
        assert x.clients == clients, (phase, r)
        mult = x.multiplicity
        assert x.samples == [samples(c, d) * k for c, k in zip(clients, mult)], (phase, r)
        assert x.oracle_calls == [oracle(c, d) * k for c, k in zip(clients, mult)], (phase, r)
        assert x.values_down == [down(c, d) for c in clients], (phase, r)
        assert x.values_up == [up(c, d) * k for c, k in zip(clients, mult)], (phase, r)
    # the cumulative columns add the exchanges up
    assert rows[-1]["exchanges"] == len(seen)
    assert rows[-1]["samples"] == sum(sum(x.samples) for x in seen)
    assert rows[-1]["oracle_calls"] == sum(sum(x.oracle_calls) for x in seen)
    assert rows[-1]["values_up"] == sum(sum(x.values_up) for x in seen)
    return seen


@pytest.mark.parametrize("name", sorted(CASES))
def test_dro_algorithms_count_as_their_papers(name):
    cfg, exchanges = CASES[name]
    check(cfg, exchanges, members=lambda x: sorted(SIZES))  # every client (cohort = all)


def test_fedavg_with_a_cohort_counts_2_m_d_values_a_round():
    m = 2
    seen = check(dro("fedavg", tau=TAU, clients_per_round=m), fedavg_like(), members=lambda x: x.clients)
    d = Federation(dro("fedavg")).w.numel()
    for x in seen:
        assert len(x.clients) == m and sum(x.values_down) + sum(x.values_up) == 2 * m * d + m  # + the m weights


def test_drfl_counts_each_draw_of_a_client():
    # DRFL draws its cohort with replacement (from lambda): a client drawn k times works
    # k times (k tau b samples, k models up); then m clients report one loss each
    m = 4
    cfg = dro("drfl", tau=TAU, clients_per_round=m)

    def exchanges(r):
        return [("local", lambda c, d: TAU * mb(c), lambda c, d: d + 1, lambda c, d: 2 * d + 1,
                 lambda c, d: GRAD * TAU * mb(c)),
                ("loss", lambda c, d: mb(c), lambda c, d: d, lambda c, d: 1, lambda c, d: mb(c))]

    seen = check(cfg, exchanges, members=lambda x: x.clients)
    local = [x for x in seen if x.phase == "local"]
    assert all(sum(x.multiplicity) == m for x in local)
    assert any(k > 1 for x in local for k in x.multiplicity)  # 4 draws of 4 clients: repeats (this seed)


# --- the compositional meta-learning family on maml-sinusoid (a sample is a task) -------
SINUSOID_TASKS = 5
"""Tasks per client of maml-sinusoid's default split (25 tasks over 5 clients)."""
K_SHOT = K_QUERY = 10
"""Support and query points of a maml-sinusoid task."""
MAML_CALLS = GRAD * K_SHOT + GRAD * K_QUERY + K_SHOT
"""Oracle calls of one second-order MAML gradient on a task: the inner gradient on the
support points (2 K), the outer gradient on the query points (2 K) and the Hessian-vector
product through the inner step on the support points (K)."""


@pytest.mark.parametrize("algo, vectors_up", [
    ("local-scgdm", 3),  # model, momentum and inner estimate (the paper's 3 vectors a round)
    ("local-scgd", 2),  # model and inner estimate
    ("local-moml", 1),  # per-task inner states stay on the client
    ("local-bsgd", 1),  # no inner state, no momentum
])
def test_local_compositional_family(algo, vectors_up):
    p, tasks = 3, 2
    cfg = RunConfig(task="maml-sinusoid", algo=algo, rounds=ROUNDS, backend="inline",
                    settings={"p": p, "batch_size": tasks, "lr": 0.01, "per_task_state": False}
                    if algo == "local-scgdm" else {"p": p, "batch_size": tasks, "lr": 0.01})

    def exchanges(r):
        # down: x-bar, t0 and the averaged states (none yet in round 1); up: the averaged
        # vectors and the count; p local steps of `tasks` tasks each
        down_vectors = 1 if r == 1 else vectors_up
        return [("local", lambda c, d: p * min(tasks, SINUSOID_TASKS), lambda c, d: down_vectors * d + 1,
                 lambda c, d: vectors_up * d + 1, lambda c, d: p * min(tasks, SINUSOID_TASKS) * MAML_CALLS)]

    check(cfg, exchanges, members=lambda x: list(range(5)))


@pytest.mark.parametrize("algo, reads_per_step, calls_per_point", [
    # support B and query B~ per local step: 2 b + 2 b gradients, b Hessian-vector products
    ("comfedl-maml", 2, 5),
    ("comfedl-damaml", 2, 5),
    # support, query (gradients: 2 b each) and the Hessian batch (its gradient and the
    # Hessian-vector product through it: 3 b)
    ("fedmaml", 3, 7),
])
def test_maml_algorithms_on_damaml(algo, reads_per_step, calls_per_point):
    b = TINY["batch_size"]
    settings = {**TINY, "gamma": 5.0} if algo == "comfedl-damaml" else dict(TINY)  # (finite exp(f / gamma))
    cfg = RunConfig(task="damaml-mnist5k", algo=algo, rounds=ROUNDS, backend="inline", settings=settings)
    tau = TINY["tau"]
    check(cfg, lambda r: [("local", lambda c, d: reads_per_step * tau * b, lambda c, d: d, lambda c, d: d + 1,
                           lambda c, d: calls_per_point * tau * b)],
          members=lambda x: list(range(10)))


def test_tr_maml_sends_the_task_weights():
    # TR-MAML's payload holds the n task weights p and n; each client returns p_i w_i, p_i
    # and the length-n loss vector (as the engine sends them: counted whole). Oracle calls:
    # comfedl-maml's 5 b per step, and the first step's outer value on its query batch (b)
    b, tau, n = TINY["batch_size"], TINY["tau"], 10
    cfg = RunConfig(task="damaml-mnist5k", algo="tr-maml", rounds=ROUNDS, backend="inline", settings=dict(TINY))
    check(cfg, lambda r: [("local", lambda c, d: 2 * tau * b, lambda c, d: d + n + 1, lambda c, d: d + 1 + n,
                           lambda c, d: 5 * tau * b + b)],
          members=lambda x: list(range(10)))


def test_every_algorithm_is_covered():
    covered = {cfg.algo for cfg, _ in CASES.values()} | {"drfl", "local-scgdm", "local-scgd", "local-moml",
                                                         "local-bsgd", "comfedl-maml", "comfedl-damaml", "fedmaml",
                                                         "tr-maml"}
    assert set(raycompo.list_algorithms()) <= covered


# --- the batched path counts what the per-client path counts ---------------------------
@pytest.mark.parametrize("cfg", [
    dro("fedavg", tau=TAU), dro("feddro", sync_every=I), dro("fedavg-co", sync_every=I), dro("fastdro", sync_every=I),
    dro("pdsgd", sync_every=I), dro("drfl", tau=TAU, clients_per_round=4), dro("qfedavg", tau=TAU),
    dro("ditto", tau=TAU), dro("mbsgd-co", sync_every=I),
    dro("comfedl", tau=TAU, gamma=2.0),
    RunConfig(task="maml-sinusoid", algo="local-scgdm", rounds=ROUNDS, backend="inline", settings={"p": 2}),
], ids=lambda c: c.algo)
def test_batched_path_counts_as_the_per_client_path(cfg):
    import dataclasses

    records = {}
    for mode in ("off", "on"):
        fed = Federation(dataclasses.replace(cfg, vectorize=mode))
        seen: list = []
        fed.exchange_listeners.append(seen.append)
        rows = fed.run_rounds(ROUNDS)
        fed.close()
        assert len(rows) == ROUNDS  # (no divergence cut a run short)
        records[mode] = seen
    assert records["on"] == records["off"] and records["off"]
