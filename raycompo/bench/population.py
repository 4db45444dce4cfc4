"""A grid of trials run one after another vs as one population (issue 42).

    python -m raycompo.bench population [--algos fedavg comfedl] [--workload synthetic]
        [--rounds 40] [--clients 200] [--m 100] [--seeds 1] [--threads 1] [--eval-every 10]
        [--sampler randperm|keyed] [--sweep [--population 8]]
    python -m raycompo.bench population --memory
    python -m raycompo.bench population --dro | --sinusoid [--sweep --population 16]

For each algorithm, the grid of its step sizes (`GRIDS`: 8 each; two of ComFedL's diverge
on `synthetic`) times `--seeds` seeds, on the inline backend with vectorized cohorts:

* `alone`: each trial a run of its own, one after the other (`raycompo.run`'s engine);
* `population`: the same trials as one population (`engine/population.py`): their local
  steps as rows of one batched computation, each trial its own run and rows.

It prints the wall seconds of each and their ratio, the trials alone once more with the
population's buffered products (`models/row_products.py`: how much of the gain is that
arithmetic rather than the batching), the trials' statuses (diverged ones
included) and each trial's relative difference of its last-row metrics between the two: float
rounding (a population's per-row step size multiplies the gradient where a trial alone passes
it as the product's alpha), which stays there where the training is stable and grows where it
is chaotic (on `synthetic` at tau 20, lr >= 0.1: there the per-client and the vectorized runs
of one trial differ as much). Workloads as
`bench cohort`'s (`logistic-784`: 784 x 10 logistic regression, tau 5, batch 32;
`synthetic`: FedProx's Synthetic(1, 1), 60 features). `--sweep` also runs the same grid as a
sweep (`raycompo.tune(space, search="grid")`, inline) with `--population 1` and with
`--population P`, twice each in the order 1, P, P, 1 after an untimed one-round sweep (which
starts Ray): the mean wall time of each (each Tune trial's start included) and whether the
trials' statuses and final losses agree. Figures are printed, never asserted.

`--dro`: instead, FedDRO's grid of `sweeps/feddro.yaml` at I = 4 (lr x beta x lam: 36 trials,
the KL objective) on `feddro-digits-st`, 30 rounds by default, alone vs as one population (beta,
lam and lr per row; each trial's evaluation Phi parts batched too).

`--sinusoid`: instead, Local-SCGDM's grid of `sweeps/sinusoid.yaml` (gamma x alpha: 16 trials, at
lr 0.01 and p = 5) on `maml-sinusoid`, 50 rounds by default, alone vs as one population (the
MAML rows of every trial's clients as one vmap; gamma and alpha per row).

`--memory`: the memory of one trial alone and of populations of P = 1, 2, 4, 8 trials (FedAvg,
step sizes 0.01 P, seed 0, 5 rounds) on dro-mnist5k (the tune quick start's task, its
defaults) and on `synthetic` (200 clients, 100 a round, vectorized), each measured in a fresh
subprocess: the resident set (RSS, /proc/self/status) added since before the run, read at
the last round, and the bytes of the torch storages alive then (each storage once: the
data, the slab, the models; what RSS adds beyond them is the allocator's and Python's), beside
`data + P x (alone - data)`, the bound of one shared data copy and P trials' own state.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from functools import partial
from typing import Any

from raycompo.bench.arguments import positive_int
from raycompo.bench.cohort import ALGOS, WORKLOADS
from raycompo.configuration.config import RunConfig
from raycompo.tasks.sampler import DEFAULT_SAMPLER

GRIDS = {
    "fedavg": [0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0],
    "comfedl": [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 1.0, 5.0],
}
"""Step sizes per algorithm (ComFedL at gamma 10, as `bench cohort`)."""


def configs(algo: str, workload: str, rounds: int, clients: int, m: int, seeds: int, eval_every: int,
            sampler: str = DEFAULT_SAMPLER) -> list[RunConfig]:
    base = {**WORKLOADS[workload], **ALGOS[algo], "n_clients": clients, "clients_per_round": m}
    return [RunConfig(task="synthetic", algo=algo, rounds=rounds, seed=seed, eval_every=eval_every, eval_clients=20,
                      backend="inline", vectorize="on", sampler=sampler, settings={**base, "lr": lr})
            for seed in range(seeds) for lr in GRIDS[algo]]


DRO_GRID = {"lr": [0.001, 0.01, 0.05, 0.1], "beta": [0.1, 0.5, 1.0], "lam": [0.5, 1.0, 5.0]}
"""`--dro`: FedDRO's lists in sweeps/feddro.yaml, at its sync_every (I) = 4."""


def dro_configs(rounds: int, seeds: int) -> list[RunConfig]:
    import itertools

    return [RunConfig(task="feddro-digits-st", algo="feddro", rounds=rounds, seed=seed, backend="inline",
                      settings={"objective": "kl", "sync_every": 4, "lr": lr, "beta": beta, "lam": lam})
            for seed in range(seeds) for lr, beta, lam in itertools.product(*DRO_GRID.values())]


SINUSOID_GRID = {"gamma": [0.3, 0.5, 0.7, 0.9], "alpha": [0.5, 0.7, 0.8, 0.9]}
"""`--sinusoid`: Local-SCGDM's gamma and alpha lists in sweeps/sinusoid.yaml, at lr 0.01 and
p = 5 (the paper's; per-task inner states, the task default)."""


def sinusoid_configs(rounds: int, seeds: int) -> list[RunConfig]:
    import itertools

    return [RunConfig(task="maml-sinusoid", algo="local-scgdm", rounds=rounds, seed=seed, eval_every=10,
                      backend="inline", settings={"lr": 0.01, "p": 5, "gamma": gamma, "alpha": alpha})
            for seed in range(seeds) for gamma, alpha in itertools.product(*SINUSOID_GRID.values())]


def last_values(result: Any) -> dict[str, float]:
    row = result.metrics.iloc[-1]
    return {k: float(v) for k, v in row.items() if "loss" in k or "acc" in k}


def difference(a: Any, b: Any) -> float:
    """The largest relative difference of two runs' last-row losses and accuracies."""
    worst = 0.0
    va, vb = last_values(a), last_values(b)
    for key, x in va.items():
        y = vb.get(key, math.nan)
        if math.isfinite(x) and math.isfinite(y):
            worst = max(worst, abs(x - y) / max(abs(x), 1e-3))
    return worst


def measure(cfgs: list[RunConfig], buffered: bool = True) -> dict[str, Any]:
    from raycompo.engine import runner
    from raycompo.engine.population import run_population
    from raycompo.models.row_products import buffered_products

    t0 = time.perf_counter()
    alone = [runner.run(c) for c in cfgs]
    t1 = time.perf_counter()
    together, population = run_population([lambda seat, c=c: runner.run(c, hosts=seat) for c in cfgs])
    t2 = time.perf_counter()
    if buffered:  # the population's products, for runs alone: what is arithmetic, what is batching
        with buffered_products():
            for c in cfgs:
                runner.run(c)
    t3 = time.perf_counter()
    failed = [r for r in together if isinstance(r, BaseException)]
    if failed:
        raise failed[0]
    return {"alone_s": t1 - t0, "population_s": t2 - t1, "alone_buffered_s": t3 - t2,
            "exchanges_together": population.together,
            "statuses_alone": [r.status for r in alone], "statuses": [r.status for r in together],
            "differences": [difference(a, b) for a, b in zip(alone, together)]}


def measure_grid(title: str, cfgs: list[RunConfig]) -> None:
    """`--dro`, `--sinusoid`: a grid alone and as one population, side by side."""
    print(f"{title}, {len(cfgs)} trials, {cfgs[0].rounds} rounds, inline (vectorized where it can), one torch thread")
    r = measure(cfgs, buffered=False)
    print(f"alone {r['alone_s']:.1f} s, population {r['population_s']:.1f} s: {r['alone_s'] / r['population_s']:.2f}x; "
          f"exchanges run together {r['exchanges_together']}; same statuses {r['statuses'] == r['statuses_alone']}; "
          f"largest relative difference of a last-row loss or accuracy {max(r['differences']):.1e}")


def sweep_space(args: Any) -> dict[str, Any]:
    """The grid sweep of the same trials (`--sweep`): one space, both algorithms' step sizes."""
    algos = {a: {"lr": GRIDS[a], **{k: [v] for k, v in ALGOS[a].items()}} for a in args.algos}
    return {"name": "population-bench", "task": "synthetic", "rounds": args.rounds, "eval_every": args.eval_every,
            "settings": {**WORKLOADS[args.workload], "n_clients": args.clients, "clients_per_round": args.m,
                         "sampler": args.sampler, "vectorize": "on", "eval_clients": 20},
            "algorithms": algos}


def sinusoid_space(rounds: int) -> dict[str, Any]:
    """The grid sweep of `--sinusoid`'s trials (`--sinusoid --sweep`)."""
    return {"name": "population-bench-sinusoid", "task": "maml-sinusoid", "rounds": rounds, "eval_every": 10,
            "metric": "val_loss", "mode": "min",
            "settings": {}, "algorithms": {"local-scgdm": {"lr": [0.01], "p": [5], **SINUSOID_GRID}}}


def measure_sweeps(args: Any, space: dict[str, Any]) -> None:
    """`--sweep`: `raycompo.tune(space, search='grid')` with `population=1` (one trial at a
    time; not None, which is 'auto') and `--population` (inline, one Ray instance for all),
    after an untimed one-round sweep that starts Ray and imports Tune, in the order 1, P, P, 1
    so that neither pays alone for what a sweep leaves warm: the wall seconds of each, their
    means side by side, and the trials of the two compared."""
    import tempfile

    import pandas as pd

    import raycompo

    tables: dict[int, Any] = {}
    seconds: dict[int, list[float]] = {1: [], args.population: []}
    with tempfile.TemporaryDirectory() as folder:
        raycompo.tune({**space, "rounds": 1}, search="grid", population=1, out=f"{folder}/warm-up", quiet=True)
        for i, size in enumerate((1, args.population, args.population, 1)):
            t0 = time.perf_counter()
            raycompo.tune(space, search="grid", population=size, out=f"{folder}/p{size}-{i}", quiet=True)
            seconds[size].append(time.perf_counter() - t0)
            tables[size] = pd.read_csv(f"{folder}/p{size}-{i}/trials.csv").sort_values("trial_id")
    a, b = tables[1], tables[args.population]
    cols = [c for c in a.columns if c.startswith("final_") and "loss" in c]
    rel = ((a[cols].to_numpy(float) - b[cols].to_numpy(float)) / (abs(a[cols].to_numpy(float)) + 1e-3))
    finite = rel[~pd.isna(rel)]
    one, many = (sum(seconds[k]) / 2 for k in (1, args.population))
    print(f"sweep (grid, {len(a)} trials): --population 1 {one:.1f} s ({seconds[1][0]:.1f} first, {seconds[1][1]:.1f} "
          f"last), --population {args.population} {many:.1f} s ({seconds[args.population][0]:.1f}, "
          f"{seconds[args.population][1]:.1f}): {one / many:.2f}x; diverged {list(a['status']).count('diverged')} / "
          f"{list(b['status']).count('diverged')}, same statuses {list(a['status']) == list(b['status'])}, "
          f"largest relative difference of a final loss {abs(finite).max() if finite.size else 0:.1e}")


MEMORY_SIZES = (1, 2, 4, 8)
"""Population sizes of `--memory`."""


def memory_configs(task: str, size: int) -> list[RunConfig]:
    """`--memory`'s trials: FedAvg at step sizes 0.01 p, seed 0, 5 rounds."""
    extra: dict[str, Any] = {}
    if task == "synthetic":
        extra = {"n_clients": 200, "clients_per_round": 100}
    return [RunConfig(task=task, algo="fedavg", rounds=5, seed=0, eval_every=1, eval_clients=20, backend="inline",
                      vectorize="on" if task == "synthetic" else "auto", settings={**extra, "lr": 0.01 * (p + 1)})
            for p in range(size)]


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS"))


def storage_mb() -> float:
    """The bytes of the torch storages alive (each once), in MB."""
    import gc

    import torch

    seen: dict[int, int] = {}
    for obj in gc.get_objects():
        if isinstance(obj, torch.Tensor) and obj.device.type == "cpu":
            s = obj.untyped_storage()
            seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values()) / 2**20


def memory_child(task: str, size: int) -> None:
    """One measurement (in its own process): prints 'rss_added storage' in MB at the last
    round of `size` trials as one population (0: one trial alone)."""
    import torch

    from raycompo.engine import federation, runner
    from raycompo.engine.population import run_population

    torch.set_num_threads(1)
    cfgs = memory_configs(task, max(size, 1))
    seen: list[float] = []
    end = federation.Federation.close

    def close(self: Any) -> None:  # the last round's memory, the first trial to end
        if not seen:
            seen.extend([rss_mb() - base, storage_mb()])
        end(self)

    federation.Federation.close = close  # type: ignore[method-assign]
    base = rss_mb()
    if size == 0:
        runner.run(cfgs[0])
    else:
        run_population([partial(run_seated, c) for c in cfgs])
    print(f"{seen[0]:.1f} {seen[1]:.1f}")


def run_seated(cfg: RunConfig, seat: Any) -> Any:
    """`cfg` run inline as a member of a population (`seat`)."""
    from raycompo.engine import runner

    return runner.run(cfg, hosts=seat)


def measure_memory() -> None:
    """`--memory`: each measurement a subprocess (`--memory-child`), figures side by side."""
    import subprocess

    print(f"{'task':<12} {'trials':>10} {'RSS added MB':>13} {'tensors MB':>11} {'data + P x (alone - data)':>26}")
    for task in ("dro-mnist5k", "synthetic"):
        alone = data = 0.0
        for size in (0, *MEMORY_SIZES):
            out = subprocess.run([sys.executable, "-m", "raycompo.bench", "population", "--memory-child", task,
                                  str(size)], capture_output=True, text=True, check=True).stdout.split()
            added, tensors = float(out[-2]), float(out[-1])
            if size == 0:
                alone, data = added, tensors
            bound = f"{data + size * (alone - data):.1f}" if size else "-"
            print(f"{task:<12} {'alone' if size == 0 else f'P = {size}':>10} {added:>13.1f} {tensors:>11.1f} {bound:>26}")
            sys.stdout.flush()


def build_parser() -> argparse.ArgumentParser:
    """The command line's options (main parses with it; tests check documented commands)."""
    p = argparse.ArgumentParser(prog="python -m raycompo.bench population", description=__doc__.split("\n\n")[0])
    p.add_argument("--algos", nargs="+", default=list(GRIDS), choices=list(GRIDS))
    p.add_argument("--workload", default="synthetic", choices=list(WORKLOADS))
    p.add_argument("--rounds", type=positive_int, default=None, help="rounds per trial (default 40; 30 with --dro, 50 with --sinusoid)")
    p.add_argument("--clients", type=positive_int, default=200)
    p.add_argument("--m", type=positive_int, default=100, help="clients per round")
    p.add_argument("--seeds", type=positive_int, default=1, help="seeds per step size")
    p.add_argument("--eval-every", type=positive_int, default=10)
    p.add_argument("--sampler", default=DEFAULT_SAMPLER, choices=["randperm", "keyed"], help="as raycompo.run's")
    p.add_argument("--sweep", action="store_true", help="also the same grid as a sweep (raycompo.tune, inline), "
                   "--population 1 vs --population P, Tune's and Ray's start included")
    p.add_argument("--population", type=positive_int, default=8, help="P of --sweep")
    p.add_argument("--dro", action="store_true", help="instead: FedDRO's grid of sweeps/feddro.yaml at I = 4 "
                   "(36 trials) on feddro-digits-st, alone vs as one population (--rounds 30 unless given)")
    p.add_argument("--sinusoid", action="store_true", help="instead: Local-SCGDM's gamma x alpha of "
                   "sweeps/sinusoid.yaml (16 trials) on maml-sinusoid, alone vs as one population "
                   "(--rounds 50 unless given)")
    p.add_argument("--memory", action="store_true", help="instead: the memory of one trial alone and of "
                   "populations of 1, 2, 4, 8 trials on dro-mnist5k and synthetic, each in a subprocess")
    p.add_argument("--memory-child", nargs=2, metavar=("TASK", "P"), help=argparse.SUPPRESS)
    p.add_argument("--threads", type=positive_int, default=1, help="torch threads (default 1: on a shared machine more "
                   "threads measure the other processes' load)")
    return p


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    if args.memory_child:
        memory_child(args.memory_child[0], int(args.memory_child[1]))
        return 0
    if args.memory:
        measure_memory()
        return 0
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.dro:
        measure_grid("feddro-digits-st: FedDRO, lr x beta x lam of sweeps/feddro.yaml at I = 4",
                     dro_configs(args.rounds or 30, args.seeds))
        return 0
    if args.sinusoid:
        measure_grid("maml-sinusoid: Local-SCGDM, gamma x alpha of sweeps/sinusoid.yaml at lr 0.01, p = 5",
                     sinusoid_configs(args.rounds or 50, args.seeds))
        if args.sweep:
            measure_sweeps(args, sinusoid_space(args.rounds or 50))
        return 0
    args.rounds = args.rounds or 40
    print(f"{args.workload}: {args.clients} clients, {args.m} a round, {args.rounds} rounds, {args.seeds} seed(s) "
          f"per step size, inline vectorized, sampler {args.sampler}, {args.threads} torch thread(s)")
    print(f"{'algorithm':<10} {'trials':>6} {'alone s':>9} {'population s':>13} {'speed-up':>9} "
          f"{'alone, buffered s':>18} {'diverged':>9}  relative difference of each trial's last row (step size: difference)")
    for algo in args.algos:
        cfgs = configs(algo, args.workload, args.rounds, args.clients, args.m, args.seeds, args.eval_every, args.sampler)
        r = measure(cfgs)
        same = r["statuses"] == r["statuses_alone"]
        diverged = f"{r['statuses'].count('diverged')}{'' if same else ' (!)'}"
        diffs = " ".join(f"{c.settings['lr']:g}:{d:.0e}" for c, d in zip(cfgs, r["differences"]))
        print(f"{algo:<10} {len(cfgs):>6} {r['alone_s']:>9.1f} {r['population_s']:>13.1f} "
              f"{r['alone_s'] / r['population_s']:>8.2f}x {r['alone_buffered_s']:>18.1f} {diverged:>9}  {diffs}")
        sys.stdout.flush()
    if args.sweep:
        measure_sweeps(args, sweep_space(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
