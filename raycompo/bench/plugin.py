"""A user's own algorithm (examples/my_algorithm.py) vs a built-in of the same cost.

    python -m raycompo.bench plugin [--rounds 20] [--hosts 2]

Prints, side by side in one run: seconds from `raycompo.run(...)` to the first row and
seconds per round, inline and on Ray with `--hosts` host actors, for the plugin (named as
'examples/my_algorithm.py:ScgdMomentum') and for the built-in `comfedl` (tau local steps
of one gradient each, the same work per step), which runs its cohort batched by default
(`--vectorize auto`; the plugin declares no batched phase) and client by client, like the
plugin, with `--vectorize off`; and the largest difference between the
plugin's inline and Ray metrics (the promise: <= 1e-6), with this process at `--threads`
(1, like each host actor: the same float32 sums, 0.0 expected) and at torch's default
threads (other reduction orders inside torch's kernels: rounding in the 7th digit). Also the lines of code a user
writes for the examples (without blank lines, comments and docstrings).
"""

from __future__ import annotations

import argparse
import ast
import io
import time
import tokenize
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def code_lines(path: Path) -> int:
    """Lines holding code: no blank lines, comments or docstrings."""
    text = path.read_text()
    docs = set()
    for node in ast.walk(ast.parse(text)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(
                getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str):
            docs.update(range(body[0].lineno, body[0].end_lineno + 1))
    # field docstrings: a string expression right after an annotated field
    for node in ast.walk(ast.parse(text)):
        for stmt in getattr(node, "body", []) if isinstance(getattr(node, "body", None), list) else []:
            if isinstance(stmt, ast.Expr) and isinstance(getattr(stmt, "value", None), ast.Constant) \
                    and isinstance(stmt.value.value, str):
                docs.update(range(stmt.lineno, stmt.end_lineno + 1))
    lines = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                            tokenize.ENDMARKER):
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines - docs)


def timed_run(task, algo, backend: str, rounds: int, hosts: int, settings: dict, vectorize: str = "auto"):
    import raycompo

    first: list[float] = []
    t0 = time.perf_counter()
    options = dict(clients_per_actor=None, cpus_per_actor=0.5) if backend == "ray" else {}
    if backend == "ray":
        from raycompo.configuration.config import RunConfig, resolve

        n = resolve(RunConfig(task=task, algo=algo, settings=settings, backend="inline")).n_clients
        options["clients_per_actor"] = -(-n // hosts)
    result = raycompo.run(task, algo, rounds=rounds, settings=settings, backend=backend, dashboard=False,
                          vectorize=vectorize,
                          on_row=lambda row: first.append(time.perf_counter()) if not first else None, **options)
    total = time.perf_counter() - t0
    per_round = float(result.metrics["round_time"].iloc[1:].mean())
    return result, first[0] - t0, per_round, total


def build_parser() -> argparse.ArgumentParser:
    """The command line's argument parser (main parses with it; tests check documented commands)."""
    p = argparse.ArgumentParser(prog="python -m raycompo.bench plugin", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--hosts", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="torch threads in this process")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import torch

    default_threads = torch.get_num_threads()  # torch's own choice, before --threads
    torch.set_num_threads(args.threads)
    plugin = f"{EXAMPLES / 'my_algorithm.py'}:ScgdMomentum"
    settings = {"gamma": 1.0}
    # Start-up paid once, before anything is timed: the data set read, and Ray itself.
    import raycompo
    from raycompo.engine.ray_start import ensure_ray

    t0 = time.perf_counter()
    raycompo.run("dro-mnist5k", "comfedl", rounds=1, settings=settings)
    t1 = time.perf_counter()
    ensure_ray(None, include_dashboard=False)
    t2 = time.perf_counter()
    print(f"once per process (not in the figures below): first data load {t1 - t0:.2f} s, ray.init {t2 - t1:.2f} s")
    print(f"dro-mnist5k, {args.rounds} rounds, Ray with {args.hosts} hosts of 0.5 CPU; times in seconds")
    print(f"{'algorithm':<34} {'backend':<8} {'to first row':>12} {'s/round':>9} {'total':>7}")
    results = {}
    runs = (("plugin ScgdMomentum", plugin, "auto"), ("built-in comfedl", "comfedl", "auto"),
            ("built-in comfedl, --vectorize off", "comfedl", "off"))
    for name, algo, vectorize in runs:
        for backend in ("inline", "ray"):
            result, first, per_round, total = timed_run("dro-mnist5k", algo, backend, args.rounds, args.hosts, settings,
                                                        vectorize)
            results[(name, backend)] = result
            print(f"{name:<34} {backend:<8} {first:12.2f} {per_round:9.4f} {total:7.2f}")
    a, b = (results[("plugin ScgdMomentum", k)].metrics for k in ("inline", "ray"))
    cols = [c for c in a.columns if "time" not in c and a[c].dtype.kind == "f"]
    print(f"plugin inline ({args.threads} thread(s)) vs ray (1 per host): max |metric difference| = "
          f"{float((a[cols] - b[cols]).abs().max().max()):.2e} over {len(a)} rows and {len(cols)} columns")
    if default_threads != args.threads:
        torch.set_num_threads(default_threads)
        c = timed_run("dro-mnist5k", plugin, "inline", args.rounds, args.hosts, settings)[0].metrics
        torch.set_num_threads(args.threads)
        print(f"plugin inline (torch's default, {default_threads} threads) vs ray (1 per host): max |metric "
              f"difference| = {float((c[cols] - b[cols]).abs().max().max()):.2e}")
    for f in ("my_algorithm.py", "my_data.py"):
        print(f"lines of code in examples/{f}: {code_lines(EXAMPLES / f)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
