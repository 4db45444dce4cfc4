"""A GPU's check and figures (issue 28, part 6): a run's rows on CUDA beside the CPU's, seconds
per round client by client and vectorized on both, and Ray hosts sharing one GPU.

    python -m raycompo.bench gpu [--m 10 100 1000] [--rounds 3] [--hosts 4] [--no-ray] [--budget-s 600]
    python -m raycompo.bench gpu --cnn [--m 10 100] [--rounds 1] [--cnn-hidden 16]  # item 4 alone (CPU: quick)

1. Rows: FedAvg and ComFedL on the cohort bench's logistic-784 workload (m = 20, 3 rounds,
   evaluated every round): inline on CUDA, client by client and vectorized, beside inline
   client by client on the CPU; and the Ray backend with `--hosts` hosts of 1 / hosts GPU each
   (`--gpus-per-actor`), vectorized, beside inline vectorized on CUDA. Printed: the largest
   relative difference |a - b| / max(1, |b|) of any metrics column, and the GPU's processes
   while the hosts live (nvidia-smi: the hosts' pids and memory, one process per host).
2. Seconds per round (after one warm-up round, `--rounds` timed) at each m of `--m`: inline
   client by client and vectorized, on the CPU (torch's threads) and on CUDA.
3. The Ray backend, `--hosts` hosts of 1 / hosts GPU each, vectorized, beside inline
   vectorized on CUDA, at each m of `--m` from 100.
4. CNN4 (batch norm on batch statistics, batched through torch.func.vmap) on CIFAR-shaped
   data (3 x 32 x 32, 10 classes, 64 images a client, batch 32, tau 2), FedAvg, at each m of
   `--m` (at most 100): one local step's gradients of the m clients (best of 3 interleaved
   repeats), and seconds per round (inline), client by client and vectorized (`--vectorize
   on`), on the CPU and on CUDA, with the largest relative difference of the rows. `--cnn`
   runs this item alone; without a GPU it prints "no GPU here" and the CPU's figures (the
   figures behind `--vectorize auto`'s per-device rule for vmap models with convolutions,
   raycompo/configuration/vectorize.py).

Without a CUDA device the 'cuda' runs run on the CPU (the code paths only, the first line
says so) and Ray is told of one GPU, so that the hosts' fractional placement still runs.
Items that would start past `--budget-s` seconds are skipped, and said so. Figures are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import subprocess
import time
from collections.abc import Callable
from typing import Any

import torch

from raycompo.bench.cohort import WORKLOADS
from raycompo.bench.cohort import config as cohort_config
from raycompo.bench.timing import engine_seconds_per_round
from raycompo.configuration.backends import get_backend
from raycompo.configuration.config import RunConfig, resolve
from raycompo.engine.driver import start_driver
from raycompo.engine.ray_start import ensure_ray

NOT_COMPARED = {"round", "round_time", "wall_time", "diverged"}
"""Row columns that are not the run's numbers (timings, flags)."""


def numeric(row: dict[str, Any]) -> dict[str, float]:
    """The row's numeric columns but `NOT_COMPARED` and private ones."""
    return {k: float(v) for k, v in row.items()
            if k not in NOT_COMPARED and not k.startswith("_") and isinstance(v, (int, float)) and not isinstance(v, bool)}


def max_relative(rows: list[dict[str, Any]], reference: list[dict[str, Any]]) -> tuple[float, str]:
    """The largest |a - b| / max(1, |b|) over the numeric columns of rows and their reference
    rows (NaN where the other is not NaN counts as inf), and where it is."""
    worst, where = 0.0, "-"
    for a, b in zip(rows, reference, strict=True):
        na, nb = numeric(a), numeric(b)
        for k in sorted(na.keys() & nb.keys()):
            x, y = na[k], nb[k]
            if math.isnan(x) and math.isnan(y):
                continue
            d = abs(x - y) / max(1.0, abs(y)) if not (math.isnan(x) or math.isnan(y)) else math.inf
            if d > worst:
                worst, where = d, f"{k}, round {a.get('round')}"
    return worst, where


def gpu_processes(cuda: bool) -> str:
    """'pid, memory' of each process on the GPU (nvidia-smi), or why there is none."""
    if not cuda:
        return "no CUDA device"
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"nvidia-smi: {e}"
    return out.replace("\n", "; ") or "none"


def rows_config(algo: str, vectorize: str, gpus: float, backend: str = "inline", hosts: int = 4,
                m: int = 20) -> RunConfig:
    """FedAvg or ComFedL on logistic-784, m clients, 3 rounds evaluated each round."""
    settings = {**WORKLOADS["logistic-784"], "n_clients": m, "clients_per_round": m}
    if algo == "comfedl":
        settings["gamma"] = 10.0  # the cohort bench's: at 1, exp(f / gamma) overflows on these clients
    extra: dict[str, Any] = {}
    if backend == "ray":
        extra = {"clients_per_actor": -(-m // hosts), "cpus_per_actor": 0.5, "host_timeout_s": 300.0}
    return RunConfig(task="synthetic", algo=algo, rounds=3, eval_every=1, settings=settings, backend=backend,
                     vectorize=vectorize, gpus_per_actor=gpus, **extra)


def run_rows(cfg: RunConfig, cuda: bool) -> tuple[list[dict[str, Any]], str]:
    """The rows of cfg's run (round 0 too) and, on Ray, the GPU's processes before the end."""
    driver = start_driver(resolve(cfg), get_backend(cfg.backend), "actor", "raycompo-bench-gpu")
    try:
        rows = [driver.initial_row()] + driver.run_rounds(cfg.rounds)
        procs = gpu_processes(cuda) if get_backend(cfg.backend).uses_ray else ""
        return rows, procs
    finally:
        driver.close()


def seconds(cfg: RunConfig, rounds: int, cuda: bool = False) -> tuple[float, str]:
    """Wall seconds per round of cfg's run after one warm-up round and, on Ray, the GPU's
    processes before the end (as `run_rows`)."""
    driver = start_driver(resolve(cfg), get_backend(cfg.backend), "actor", "raycompo-bench-gpu")
    try:
        t = engine_seconds_per_round(driver, rounds, 1).wall
        return t, gpu_processes(cuda) if get_backend(cfg.backend).uses_ray else ""
    finally:
        driver.close()


def cnn_config(m: int, vectorize: str, gpus: float, hidden: int, rounds: int = 1) -> RunConfig:
    """FedAvg on CIFAR-shaped random data (m clients of 64 + 16 images) with CNN4 of
    `hidden` filters: item 4."""
    from raycompo.models.cnn4 import CNN4
    from raycompo.tasks.from_data import task_from_arrays

    gen = torch.Generator().manual_seed(0)
    n = 80 * m
    x, y = torch.randn(n, 3, 32, 32, generator=gen), torch.randint(0, 10, (n,), generator=gen)
    task: Any = task_from_arrays(x, y, n_clients=m, model=lambda: CNN4(3, 10, 32, hidden=hidden), name="cnn4-cifar-shaped")
    settings = {"clients_per_round": m, "tau": 2, "batch_size": 32, "lr": 0.05}
    return RunConfig(task=task, algo="fedavg", rounds=rounds, eval_every=10**6, settings=settings, backend="inline",
                     vectorize=vectorize, gpus_per_actor=gpus)


def cnn_step_ms(k: int, hidden: int, device: str, reps: int = 3) -> tuple[float, float]:
    """Milliseconds of one local step's gradients of k CNN4 clients (batch 32, CIFAR-shaped):
    (client by client, one vmap), the best of `reps` interleaved repeats after a warm-up."""
    import torch.nn.functional as F

    from raycompo.models.cnn4 import CNN4
    from raycompo.models.flat import FlatModel

    torch.manual_seed(0)
    model = FlatModel(CNN4(3, 10, 32, hidden=hidden)).to(device)
    w = model.flatten().to(device).repeat(k, 1)
    x, y = torch.randn(k, 32, 3, 32, 32, device=device), torch.randint(0, 10, (k, 32), device=device)

    def vmapped() -> None:
        wr = w.clone().requires_grad_(True)
        loss = F.cross_entropy(model.batched(wr, x).transpose(1, 2), y, reduction="none").mean(1).sum()
        torch.autograd.grad(loss, wr)

    def one_by_one() -> None:
        for i in range(k):
            wi = w[i].clone().requires_grad_(True)
            torch.autograd.grad(F.cross_entropy(model(wi, x[i]), y[i]), wi)

    best = {one_by_one: math.inf, vmapped: math.inf}
    for rep in range(reps + 1):
        for f in best:
            if device == "cuda":
                torch.cuda.synchronize()
            t = time.perf_counter()
            f()
            if device == "cuda":
                torch.cuda.synchronize()
            if rep:
                best[f] = min(best[f], time.perf_counter() - t)
    return best[one_by_one] * 1e3, best[vmapped] * 1e3


def cnn_item(a: argparse.Namespace, gpu: float, cuda: bool, skipped: Any) -> None:
    """Item 4: CNN4 on CIFAR-shaped data, per client vs vmapped, on the CPU and on CUDA."""
    print(f"\n4. ms per round, CNN4 (hidden {a.cnn_hidden}) on CIFAR-shaped data, FedAvg (tau 2, batch 32), inline, "
          f"{a.rounds} rounds after a warm-up{'' if cuda else '; no GPU here: CPU only'}", flush=True)
    devices = (("cpu", 0.0), ("cuda", gpu)) if cuda else (("cpu", 0.0),)
    for m in [m for m in a.m if m <= 100]:
        for dev, g in devices:
            if skipped(f"cnn4 {dev} m={m}"):
                continue
            one, vm = cnn_step_ms(m, a.cnn_hidden, dev)
            print(f"cnn4 {dev:4} m={m:4d}: one local step's gradients: client by client {one:9.1f}, vmap {vm:9.1f}, "
                  f"one by one / vmap {one / vm:.2f}x", flush=True)
            rows = {v: run_rows(cnn_config(m, v, g, a.cnn_hidden, 2), cuda)[0] for v in ("off", "on")}
            d, at = max_relative(rows["on"], rows["off"])
            t = {v: seconds(cnn_config(m, v, g, a.cnn_hidden, a.rounds + 1), a.rounds)[0] for v in ("off", "on")}
            print(f"cnn4 {dev:4} m={m:4d}: client by client {t['off'] * 1e3:9.1f}, vectorized (vmap) {t['on'] * 1e3:9.1f}, "
                  f"one by one / vmap {t['off'] / t['on']:.2f}x; rows vmap vs per client {d:.1e} ({at})", flush=True)


def build_parser() -> argparse.ArgumentParser:
    """The command line's argument parser (main parses with it; tests check documented commands)."""
    p = argparse.ArgumentParser(prog="python -m raycompo.bench gpu", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--m", type=int, nargs="+", default=[10, 100, 1000], help="cohort sizes (the whole population)")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds per run (after one warm-up round)")
    p.add_argument("--hosts", type=int, default=4, help="Ray hosts sharing the GPU, 1 / hosts GPU each")
    p.add_argument("--no-ray", action="store_true", help="leave out the Ray runs")
    p.add_argument("--cnn", action="store_true", help="run item 4 alone (CNN4 per client vs vmapped)")
    p.add_argument("--cnn-hidden", type=int, default=16, help="filters per convolution of item 4's CNN4")
    p.add_argument("--budget-s", type=float, default=600.0, help="skip the items that would start after this many seconds")
    return p


def rows_item(a: argparse.Namespace, gpu: float, cuda: bool, share: float, skipped: Callable[[str], bool]) -> None:
    """Item 1: the rows on CUDA (client by client and vectorized, inline and on fractional
    Ray hosts) against the CPU's, logistic-784, m = 20."""
    print("\n1. rows, logistic-784, m = 20, 3 rounds: largest |a - b| / max(1, |b|) of any metrics column", flush=True)
    for algo in ("fedavg", "comfedl"):
        if skipped(f"rows of {algo}"):
            continue
        cpu_rows, _ = run_rows(rows_config(algo, "off", 0.0), cuda)
        vec_rows: list[dict[str, Any]] = []
        for v in ("off", "on"):
            rows, _ = run_rows(rows_config(algo, v, gpu), cuda)
            d, at = max_relative(rows, cpu_rows)
            print(f"{algo:8} cuda inline, vectorize {v:3} vs cpu inline client by client: {d:.2e} ({at})", flush=True)
            vec_rows = rows
        if not a.no_ray:
            rows, procs = run_rows(rows_config(algo, "on", share, "ray", a.hosts), cuda)
            d, at = max_relative(rows, vec_rows)
            print(f"{algo:8} ray, {a.hosts} hosts x {share:g} GPU, vectorized vs cuda inline vectorized: {d:.2e} ({at}); "
                  f"GPU processes (pid, memory): {procs}", flush=True)


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    t0 = time.time()
    cuda = torch.cuda.is_available()
    gpu = 1.0 if cuda else 0.0  # inline: any gpus_per_actor > 0 puts the host on CUDA
    share = 1.0 / a.hosts

    def skipped(what: str) -> bool:
        if time.time() - t0 > a.budget_s:
            print(f"{what}: skipped (--budget-s {a.budget_s:g})", flush=True)
            return True
        return False

    where = (f"CUDA: {torch.cuda.get_device_name(0)}, {torch.cuda.get_device_properties(0).total_memory / 2**30:.0f} GiB"
             if cuda else "no CUDA device: every 'cuda' run below runs on the CPU (the code paths only)")
    print(f"{where}; torch {torch.__version__}, {torch.get_num_threads()} CPU threads, {os.cpu_count()} cores", flush=True)
    if a.cnn:
        cnn_item(a, gpu, cuda, skipped)
        print(f"\ndone in {time.time() - t0:.0f} s", flush=True)
        return 0
    if not a.no_ray:
        # a private Ray on loopback; without a GPU it is told of one, so that the fractional
        # hosts are placed as on a GPU node
        ensure_ray(include_dashboard=False, num_cpus=max(4, a.hosts), num_gpus=None if cuda else 1, quiet=True)
    rows_item(a, gpu, cuda, share, skipped)

    print(f"\n2. ms per round, logistic-784 (tau 5, batch 32), inline, {a.rounds} rounds after a warm-up", flush=True)
    print(f"{'algo':8} {'m':>5} {'cpu':>10} {'cpu vec':>10} {'cuda':>10} {'cuda vec':>10} {'cuda one by one / vec':>22} "
          f"{'cpu vec / cuda vec':>19}", flush=True)
    for algo in ("fedavg", "comfedl"):
        for m in a.m:
            if skipped(f"{algo} m={m}"):
                continue
            t = {(dev, v): seconds(dataclasses.replace(cohort_config("logistic-784", algo, m, "inline", v),
                                                       gpus_per_actor=g), a.rounds)[0]
                 for dev, g in (("cpu", 0.0), ("cuda", gpu)) for v in ("off", "on")}
            print(f"{algo:8} {m:5d} {t['cpu', 'off'] * 1e3:10.1f} {t['cpu', 'on'] * 1e3:10.1f} "
                  f"{t['cuda', 'off'] * 1e3:10.1f} {t['cuda', 'on'] * 1e3:10.1f} {t['cuda', 'off'] / t['cuda', 'on']:21.1f}x "
                  f"{t['cpu', 'on'] / t['cuda', 'on']:18.2f}x", flush=True)

    if not a.no_ray:
        print(f"\n3. ms per round, ray: {a.hosts} hosts x {share:g} GPU, vectorized, beside inline cuda vectorized", flush=True)
        for algo in ("fedavg", "comfedl"):
            for m in [m for m in a.m if m >= 100]:
                if skipped(f"ray {algo} m={m}"):
                    continue
                inline, _ = seconds(dataclasses.replace(cohort_config("logistic-784", algo, m, "inline", "on"),
                                                        gpus_per_actor=gpu), a.rounds)
                cfg = dataclasses.replace(cohort_config("logistic-784", algo, m, "ray", "on", a.hosts), gpus_per_actor=share)
                on_ray, procs = seconds(cfg, a.rounds, cuda)
                print(f"{algo:8} m={m:5d}: ray {on_ray * 1e3:.1f}, inline {inline * 1e3:.1f} "
                      f"(inline / ray {inline / on_ray:.2f}x); GPU processes (pid, memory): {procs}", flush=True)
    cnn_item(a, gpu, cuda, skipped)
    print(f"\ndone in {time.time() - t0:.0f} s", flush=True)
    return 0
