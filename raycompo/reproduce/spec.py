"""How a paper claim is declared: plain data (variants, metrics, figure panels, checks).

A claim is a `Claim`; each curve of its figure is a `Variant`, declared in one line with
`V(label, algo, group=..., **settings)`. Settings are the flat keys of `python -m
raycompo.run --set` (task and algorithm settings), so a new option of the engine (e.g. a
stable log-sum-exp switch) is added to a claim as one more keyword, never as code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from raycompo.costs.axes import COST_AXES

LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+=-]*$")


@dataclass(frozen=True)
class Variant:
    """One curve: an algorithm with its settings, run once per seed."""

    label: str
    """Unique within the claim; names the run folders (`runs/<label>-s<seed>`)."""
    algo: str
    settings: dict[str, Any] = field(default_factory=dict)
    """Overrides on top of the claim's settings (task defaults first)."""
    group: str = ""
    """Panels with `group` set show only the variants of that group (e.g. one row per ablation)."""
    rounds: int | None = None
    """Communication rounds (None: the claim's)."""
    eval_every: int | None = None
    """Evaluation period in rounds (None: the claim's)."""
    x_scale: float = 1.0
    """The figure's x axis is round * x_scale (e.g. p, to plot local iterations)."""
    yours: bool = False
    """An extra curve the user added (`--with`): run, tabled and drawn like the claim's
    variants, never read by the verdict. Its `algo` is the spec that finds it from any folder."""
    system: str | None = None
    """A simulated system for its runs (`--system`: a built-in profile name; None: none)."""
    budget: dict[str, float] = field(default_factory=dict)
    """A cost budget for its runs (`--budget KEY=VALUE`, e.g. {'values_up': 2e4}): each run stops
    at the first round its cumulative cost reaches it (equal-cost comparisons)."""
    run: dict[str, Any] = field(default_factory=dict)
    """Other RunConfig keys of its runs (`RUN_KEYS`: `aggregation`, `concurrency`, `buffer`, ...),
    as `python -m raycompo.run --aggregation buffered --concurrency 10 --buffer 5` sets them."""
    transforms: dict[str, Any] = field(default_factory=dict)
    """Payload transforms of its runs, RunConfig fields (docs/compression.md): `compress`
    ({key: method}), `compress_down`, `dp_clip`, `dp_noise`, `dp_delta`."""

    def described(self) -> str:
        """Its settings as the tables show them ('k=v ...', and the system when it has one)."""
        return " ".join([f"{k}={x}" for k, x in self.settings.items()] + ([f"system={self.system}"] if self.system else [])
                        + [f"{k}={x}" for k, x in self.run.items()]
                        + [f"budget {k}={x:g}" for k, x in self.budget.items()]
                        + [f"{k}={x}" for k, x in self.transforms.items()])


CLAIM_OWNED = ("task", "algo", "rounds", "seed", "settings", "backend", "data_dir", "eval_every", "system", "budget",
               "clients_per_actor", "cpus_per_actor", "gpus_per_actor")
"""RunConfig fields a claim or a variant's own arguments set."""


def run_keys() -> tuple[str, ...]:
    """The RunConfig fields a variant takes as keywords beside its settings (`V(..., aggregation=
    'buffered', buffer=5)`): every field but the claim's own, read from RunConfig itself."""
    import dataclasses

    from raycompo.configuration.config import RunConfig

    return tuple(f.name for f in dataclasses.fields(RunConfig) if f.name not in CLAIM_OWNED)


def V(label: str, algo: str, *, group: str = "", rounds: int | None = None, eval_every: int | None = None,
      x_scale: float = 1.0, system: str | None = None, budget: dict[str, float] | None = None,
      transforms: dict[str, Any] | None = None, **settings: Any) -> Variant:
    """One variant in one line: `V("comfedl-g1", "comfedl", gamma=1)`; `system=` a simulated
    system's profile (`V("fedavg-drop", "fedavg", system="mobile-fastest")`); `budget=` a cost
    budget (`V("tau5", "comfedl", tau=5, budget={"values_up": 2e4})`); a keyword that is a
    RunConfig field (`run_keys`: `aggregation`, `concurrency`, `buffer`, ...) sets that field
    (`V("fedbuff", "fedavg", system="mobile-sync", aggregation="buffered", concurrency=10, buffer=5)`),
    any other a task or algorithm setting; `transforms=` compression and DP
    (`V("topk", "fedavg", transforms={"compress": {"*": "topk:0.01"}})`)."""
    keys = run_keys()
    run = {k: settings.pop(k) for k in list(settings) if k in keys}
    return Variant(label, algo, dict(settings), group, rounds, eval_every, x_scale, system=system,
                   budget=dict(budget or {}), run=run, transforms=dict(transforms or {}))


@dataclass(frozen=True)
class Panel:
    """One subplot: `metric` against the x axis, for the variants of `group` (None: all)."""

    metric: str
    title: str
    group: str | None = None
    log: bool = False
    """Logarithmic y axis."""


@dataclass(frozen=True)
class Better:
    """Paper: variant `winner` has a better final `metric` than each of `losers`
    (mode 'max': higher is better, 'min': lower). A loser that diverged in every seed is
    beaten; a winner that diverged in every seed loses."""

    metric: str
    winner: str
    losers: tuple[str, ...]
    mode: str = "max"


@dataclass(frozen=True)
class Bound:
    """Paper: the final `metric` of `variant` is below (op '<') or above (op '>') `value`."""

    variant: str
    metric: str
    op: str
    value: float


@dataclass(frozen=True)
class Close:
    """Paper: the final `metric` of variants `a` and `b` differ by at most `tol`
    (e.g. 'comparable test accuracy', 'performance saturates'). A variant that diverged in
    every seed is not close to anything."""

    metric: str
    a: str
    b: str
    tol: float


Check = Better | Bound | Close


@dataclass(frozen=True)
class Alt:
    """A second verdict: the claim's checks re-read with some variants swapped for others,
    e.g. ComFedL as printed (diverges at the paper's step sizes) swapped for ComFedL with
    the stable `normalizer=lse` option. The printed version stays the claim's verdict."""

    name: str
    """Shown before the second verdict, e.g. 'with normalizer=lse'."""
    swap: dict[str, str]
    """Variant label in the checks -> the variant read in its place."""

    def apply(self, c: Check) -> Check:
        s = self.swap.get
        if isinstance(c, Better):
            return Better(c.metric, s(c.winner, c.winner), tuple(s(n, n) for n in c.losers), c.mode)
        if isinstance(c, Bound):
            return Bound(s(c.variant, c.variant), c.metric, c.op, c.value)
        return Close(c.metric, s(c.a, c.a), s(c.b, c.b), c.tol)


@dataclass(frozen=True)
class Full:
    """What `--full` changes: the paper's data set (and its budget)."""

    task: str
    rounds: int | None = None
    eval_every: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    """Replace the claim's (offline) settings."""


@dataclass(frozen=True)
class Claim:
    name: str
    source: str
    """Where the paper states it, e.g. 'ComFedL journal, section 5.1, Figure 2'."""
    title: str
    task: str
    rounds: int
    variants: tuple[Variant, ...]
    metrics: tuple[str, ...]
    """Columns of table.csv: the final value of each (the last evaluated round) over seeds.
    'mean:<metric>' is the metric's mean over the evaluated rounds (a speed proxy); a cost
    axis name ('values', 'samples', ...) its final cumulative cost; 'reach:<axis>:<metric><X>'
    (or '>') the cost of `axis` at the first evaluated round where `metric` is below (above)
    X, e.g. 'reach:values:objective<0.5' (a run that never gets there has no value)."""
    panels: tuple[Panel, ...]
    paper_says: str
    """The claim in words, the first half of the verdict line."""
    checks: tuple[Check, ...] = ()
    eval_every: int = 1
    settings: dict[str, Any] = field(default_factory=dict)
    """Settings of every run of the claim (offline task)."""
    full: Full | None = None
    """None: the offline task already is the paper's (e.g. maml-sinusoid, toy-co)."""
    ncols: int = 2
    x_label: str = "communication round"
    x_axis: str | None = None
    """A cost axis of raycompo.costs.axes ('values', 'samples', 'bytes', 'sim_time') for the
    figure's x axis instead of rounds (then `x_label` defaults to the axis's label)."""
    seeds: int = 5
    tiny: dict[str, Any] = field(default_factory=dict)
    """Task settings that shrink the offline task for smoke tests."""
    notes: str = ""
    """Where the claim as run diverges from the paper (shown in table.md and --list)."""
    alts: tuple[Alt, ...] = ()
    """Further verdicts with variants swapped (see `Alt`), one line each after the claim's."""
    sampler: str | None = None
    """The mini-batch sampler of every run (RunConfig.sampler; None: the run default, 'keyed'):
    'randperm' for a claim whose committed report was measured before 'keyed' became the
    default and was not re-run since, so that its command repeats its report's rows."""

    def __post_init__(self) -> None:
        labels = [v.label for v in self.variants]
        bad = [lab for lab in labels if not LABEL.match(lab)]
        if bad:
            raise ValueError(f"claim {self.name}: labels must be file-name safe: {bad}")
        if self.x_axis is not None and self.x_axis not in COST_AXES:
            raise ValueError(f"claim {self.name}: x_axis {self.x_axis!r} is not a cost axis {sorted(COST_AXES)}")
        if len(set(labels)) != len(labels):
            raise ValueError(f"claim {self.name}: duplicate variant labels")
        groups = {v.group for v in self.variants}
        for p in self.panels:
            if p.group is not None and p.group not in groups:
                raise ValueError(f"claim {self.name}: panel {p.title!r} shows unknown group {p.group!r}")
        swapped = [alt.apply(c) for alt in self.alts for c in self.checks]
        for c in (*self.checks, *swapped):
            names = {Better: lambda c: (c.winner, *c.losers), Bound: lambda c: (c.variant,), Close: lambda c: (c.a, c.b)}[type(c)](c)
            missing = [n for n in names if n not in labels]
            if missing:
                raise ValueError(f"claim {self.name}: check names unknown variants {missing}")

    def variant(self, label: str) -> Variant:
        return next(v for v in self.variants if v.label == label)
