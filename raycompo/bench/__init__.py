"""Benchmarks: figures are printed, never asserted (timings depend on the machine and its load).

    python -m raycompo.bench NAME [ARGS...]     # NAME --help: that benchmark's options

  round        seconds per round of one ComFedL run: hand-written torch loop vs inline vs ray,
               and the cost of the Ray driver's pool_stats() (`python -m raycompo.bench
               --threads 1`, options and no NAME, runs this one)
  cohort       seconds per round of m = 10..1000 clients: floors, hand loop, hand batched, inline, inline
               vectorized, ray, ray vectorized (FedAvg and ComFedL, two workloads)
  startup      from the command to round 1, inline vs ray (with and without the dashboard),
               and where the time goes (imports, Ray start, actors, first rows)
  checkpoint   seconds per checkpoint and its share of a round, with per-client state (Ditto)
  feddro       FedDRO's per-step cost of the y exchange, ray vs inline, per client and vectorized
  vectorize    per round and per evaluation, client by client vs vectorized, for each family that batches
  recovery     recovery time after a killed host actor, side by side with the unfaulted run
  scale        seconds per round, memory and start-up with up to a million clients
  state_store  StateStore memory per client and put / get time, in memory and spilled
  sweep        sweep trials per minute, inline vs ray (reused / fresh hosts), host start-up and memory
  plugin       a user's own algorithm (examples/) vs a built-in: time to the first row, s/round,
               inline vs ray metrics difference, lines of code of the examples
  ledger       what counting every exchange's costs adds to a round at 10^6 clients, with and
               without counting side by side (target <= 3%)
  per_client   what per-client results (spread columns, clients.csv) add to an evaluation of
               K = 10^3, 10^4 of 10^6 clients
  async        FedBuff (C = 100, K = 10): seconds per 100 client updates vs a synchronous batched
               round of 100 (logistic-784), and the event loop's overhead per server step at 10^6, 10^7 clients
  system       the simulated system per cohort of 100 at 10^7 clients beside the engine's own draw,
               and a mobile run's checkpoint size at round 300 vs round 100 (bounded state)
  compress     FedAvg's batched logistic-784 round with top-k, QSGD, sign, rand-k and DP beside
               the uncompressed round (target: top-k and QSGD within 1.3x)
  gpu          a run's rows on CUDA beside the CPU's, seconds per round client by client and
               vectorized on the CPU and on CUDA, and Ray hosts sharing one GPU (--gpus-per-actor 0.25)
  ops          aten operations and Python calls per round at m = 10, 100, 1000 clients (vectorized,
               inline, synthetic): how the round's work grows with m, counted, not timed
  sampler      milliseconds to draw a cohort's mini-batches: a randperm per client and step vs the
               keyed sampler's one call for the chunk (--sampler keyed), on the CPU (and CUDA)
  population   a grid of step sizes (x seeds) run one trial after another vs as one population
               (their local steps as rows of one batched computation), and their rows' difference

Each is a module `raycompo.bench.<NAME>` with a `main(argv)`.
"""

from __future__ import annotations

#: benchmark name (the command's NAME) -> module holding its `main(argv)`
BENCHMARKS: dict[str, str] = {
    "round": "raycompo.bench.round",
    "cohort": "raycompo.bench.cohort",
    "startup": "raycompo.bench.startup",
    "checkpoint": "raycompo.bench.checkpoint",
    "feddro": "raycompo.bench.feddro",
    "vectorize": "raycompo.bench.vectorize",
    "recovery": "raycompo.bench.recovery",
    "scale": "raycompo.bench.scale",
    "state_store": "raycompo.bench.state_store",
    "sweep": "raycompo.bench.sweep",
    "plugin": "raycompo.bench.plugin",
    "ledger": "raycompo.bench.ledger",
    "per_client": "raycompo.bench.per_client",
    "async": "raycompo.bench.asynchronous",
    "system": "raycompo.bench.system",
    "compress": "raycompo.bench.compress",
    "gpu": "raycompo.bench.gpu",
    "ops": "raycompo.bench.ops",
    "sampler": "raycompo.bench.sampler",
    "population": "raycompo.bench.population",
}

#: what `python -m raycompo.bench -ARGS` (options and no NAME) runs, as the README quotes it
DEFAULT = "round"
