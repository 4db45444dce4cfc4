"""How the server aggregates on the simulated clock (issue 31): synchronous rounds, FedBuff's
buffer (Nguyen et al., AISTATS 2022) or FedAsync (Xie et al. 2019), and their settings.

* `sync` (default): every exchange is a barrier (raycompo/system/clock.py); a round is one
  `server_round` of the algorithm.
* `buffered` (FedBuff): `concurrency` C clients are in flight at all times; each starts from
  the model version current when it was dispatched and sends Delta = w^{t'} - y; the server
  sums s(tau) Delta over `buffer` K arrivals and sets w <- w - server_lr (1/K) sum (the
  issue's 1/K normalisation; FLSim's FedBuffAggregator sums without it: its lr is ours
  times K).
* `async` (FedAsync): K = 1; each arrival sets w <- (1 - alpha_t) w + alpha_t y with
  alpha_t = async_alpha * s(tau); the client's local objective adds
  (async_rho / 2) ||x - w^{t'}||^2 (algorithms that declare it: FedAvg).

The staleness tau of an update is the number of server steps applied between the client's
download and the step that applies it; s is `staleness_weight`. An update whose tau exceeds
`max_staleness` is dropped: it does not count towards K.

The settings travel in the run's `--set` namespace (`AggregationSettings`, flat keys that no
task or algorithm declares) and are recorded in config.json's `aggregation_settings`.
"""

from __future__ import annotations

from dataclasses import dataclass

from raycompo.settings import require

AGGREGATIONS = ("sync", "buffered", "async")
"""`--aggregation` values: synchronous rounds, FedBuff, FedAsync."""

STALENESS = ("constant", "polynomial", "hinge")
"""Staleness weights s(tau): constant 1; polynomial (1 + tau)^-a (FedBuff, FedAsync);
hinge 1 if tau <= b else 1 / (a (tau - b) + 1) (FedAsync)."""

DEFAULT_BUFFER = 10
"""FedBuff's K when `--buffer` is not given (the paper's K = 10), at most C."""

STALENESS_A_DEFAULT = {"constant": 0.0, "polynomial": 0.5, "hinge": 10.0}
"""a when `staleness_a` is None: FedBuff's polynomial exponent 0.5; FedAsync's hinge a = 10."""

STALENESS_B_DEFAULT = 4.0
"""b of the hinge when `staleness_b` is None (FedAsync's b = 4)."""


@dataclass
class AggregationSettings:
    """Settings of the asynchronous aggregations (`--aggregation buffered|async`), set by flat
    key like the task's and algorithm's (`--set staleness=hinge server_lr=0.5`)."""

    staleness: str = "polynomial"
    """Staleness weight s(tau): 'constant' (1), 'polynomial' ((1 + tau)^-a, FedBuff's
    default), 'hinge' (1 if tau <= b, else 1 / (a (tau - b) + 1), FedAsync)."""
    staleness_a: float | None = None
    """a of s(tau): the polynomial's exponent or the hinge's slope (None: 0.5 polynomial,
    10 hinge)."""
    staleness_b: float | None = None
    """b of the hinge: staleness up to which an update keeps weight 1 (None: 4)."""
    server_lr: float = 1.0
    """eta_g, FedBuff's server learning rate: w <- w - eta_g (1/K) sum s(tau) Delta."""
    max_staleness: int | None = None
    """Updates with tau above this are dropped and do not count towards K (None: none is)."""
    async_alpha: float = 0.6
    """FedAsync's mixing alpha: w <- (1 - alpha s(tau)) w + alpha s(tau) y (0 < alpha <= 1)."""
    async_rho: float = 0.0
    """FedAsync's rho: the local objective adds (rho / 2) ||x - w^{t'}||^2 (0: no term; only
    algorithms that declare the proximal term accept > 0)."""

    def validate(self) -> None:
        require(self.staleness in STALENESS,
                f"setting staleness must be one of {', '.join(STALENESS)}, got {self.staleness!r}")
        require(self.staleness_a is None or self.staleness_a >= 0, f"setting staleness_a must be >= 0, got {self.staleness_a}")
        require(self.staleness_b is None or self.staleness_b >= 0, f"setting staleness_b must be >= 0, got {self.staleness_b}")
        require(self.server_lr > 0, f"setting server_lr must be > 0, got {self.server_lr}")
        require(self.max_staleness is None or self.max_staleness >= 0,
                f"setting max_staleness must be >= 0 (0: only updates from the current model count), got {self.max_staleness}")
        require(0 < self.async_alpha <= 1, f"setting async_alpha must be in (0, 1], got {self.async_alpha}")
        require(self.async_rho >= 0, f"setting async_rho must be >= 0, got {self.async_rho}")

    @property
    def a(self) -> float:
        return STALENESS_A_DEFAULT[self.staleness] if self.staleness_a is None else self.staleness_a

    @property
    def b(self) -> float:
        return STALENESS_B_DEFAULT if self.staleness_b is None else self.staleness_b

    def weight(self, tau: int) -> float:
        """s(tau), the staleness weight of an update tau server steps old."""
        return staleness_weight(self.staleness, tau, self.a, self.b)


def staleness_weight(kind: str, tau: int, a: float, b: float) -> float:
    """s(tau): 'constant' 1; 'polynomial' (1 + tau)^-a; 'hinge' 1 if tau <= b else
    1 / (a (tau - b) + 1). (FLSim also divides by s(avg_staleness); the papers do not.)"""
    if kind == "constant":
        return 1.0
    if kind == "polynomial":
        return float((1.0 + tau) ** -a)
    if kind == "hinge":
        return 1.0 if tau <= b else 1.0 / (a * (tau - b) + 1.0)
    raise ValueError(f"unknown staleness weight {kind!r}")


def aggregation_keys() -> list[str]:
    """The flat `--set` keys of `AggregationSettings`."""
    from raycompo.settings import names

    return names(AggregationSettings)


@dataclass(frozen=True)
class Plan:
    """An asynchronous aggregation, resolved: which, C, K and its settings (config.json's
    `aggregation_plan`)."""

    kind: str
    """'buffered' (FedBuff) or 'async' (FedAsync)."""
    concurrency: int
    """C: clients in flight at all times."""
    buffer: int
    """K: arrivals applied per server step (1 for 'async')."""
    settings: AggregationSettings
    proximal: bool = False
    """FedAsync's proximal term is sent to the clients (async_rho > 0 and the algorithm reads it)."""

    def record(self) -> dict:
        from dataclasses import asdict

        return {"aggregation": self.kind, "concurrency": self.concurrency, "buffer": self.buffer,
                **asdict(self.settings)}


def plan(kind: str, concurrency: int | None, buffer: int | None, given: dict, cohort: int, n_clients: int,
         has_system: bool, reachable: int | None = None) -> Plan | None:
    """Check an aggregation's configuration before anything runs (a ConfigError naming the
    setting): None for 'sync' (which takes none of the asynchronous settings), else its
    `Plan`. `given`: the `AggregationSettings` keys the user set; `cohort`: the algorithm's m
    (C's default); `reachable`: clients that can ever be online (None: all)."""
    from raycompo.errors import ConfigError
    from raycompo.settings import build

    require(kind in AGGREGATIONS, f"aggregation must be one of {', '.join(AGGREGATIONS)}, got {kind!r}")
    if kind == "sync":
        extra = [f"--{k} (the config's {k})" for k, v in (("concurrency", concurrency), ("buffer", buffer)) if v is not None]
        extra += [f"setting {k}" for k in sorted(given)]
        if extra:
            raise ConfigError(f"{extra[0]} applies to --aggregation buffered or async; this run's aggregation is "
                              "'sync' (synchronous rounds)")
        return None
    if not has_system:
        raise ConfigError(f"--aggregation {kind} runs on the simulated clock: give --system (e.g. --system uniform "
                          "or mobile; docs/system.md)")
    only = {"buffered": ("async_alpha", "async_rho"), "async": ("server_lr",)}[kind]
    for key in only:
        if key in given:
            other = "async" if kind == "buffered" else "buffered"
            raise ConfigError(f"setting {key} applies to --aggregation {other}; this run's aggregation is {kind!r}")
    s = build(AggregationSettings, given)
    s.validate()
    c = cohort if concurrency is None else concurrency
    require(c >= 1, f"concurrency (--concurrency, C) must be >= 1, got {c}")
    require(c <= n_clients, f"concurrency (--concurrency, C) must be at most the {n_clients} clients, got {c}")
    if reachable is not None:
        require(reachable >= 1, "no client is ever online in this system profile: nobody can be dispatched")
        require(c <= reachable, f"concurrency (--concurrency, C) = {c} but only {reachable} clients are ever online "
                                "in this system profile; lower C")
    if kind == "async":
        require(buffer in (None, 1), f"--aggregation async (FedAsync) applies every arrival: --buffer must be 1 or "
                                     f"left out, got {buffer}")
        k = 1
    else:
        k = min(DEFAULT_BUFFER, c) if buffer is None else buffer
        require(k >= 1, f"buffer (--buffer, K) must be >= 1, got {k}")
        require(k <= c, f"buffer (--buffer, K) = {k} is more than concurrency (--concurrency, C) = {c}: a server "
                        "step would wait for more arrivals than there are clients in flight; use K <= C")
    return Plan(kind, c, k, s, proximal=kind == "async" and s.async_rho > 0)
