"""The Ray backend: client hosts as actors with persistent state, and a driver actor.

* Each host actor (named `clients-<j>` in the run's namespace; its repr, the dashboard's
  Repr column, says which clients of which task and run) owns the data and state of a
  block of clients for the whole run.
* Hosts ask for `cpus_per_actor` CPUs and `gpus_per_actor` GPUs (fractions share a GPU);
  on a CPU-only cluster the same code runs with num_gpus=0.
* Every call `ray.put`s the payload (the global model) once and sends the reference to
  all hosts; hosts return partial sums pre-reduced over their clients.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

import ray
import torch

from raycompo.algorithms.base import State
from raycompo.algorithms.client_rows import Shares
from raycompo.configuration.config import Resolved
from raycompo.engine.actor_failures import HostTimeoutError
from raycompo.engine.host_actors import FreshHosts, HostSource
from raycompo.engine.ledger import MemberCosts
from raycompo.engine.placement import plan_placement
from raycompo.engine.pools import combine
from raycompo.errors import RaycompoError


def unwrap(exc: BaseException) -> BaseException:
    """The user error (RaycompoError / ValueError: bad settings, missing data) behind a Ray
    error, following `.cause` through nested actors (a host that failed inside the driver
    actor's constructor is two levels down); `exc` itself when there is none."""
    cause = getattr(exc, "cause", None)
    while cause is not None:
        if isinstance(cause, (RaycompoError, ValueError)) and not isinstance(cause, ray.exceptions.RayError):
            return cause
        cause = getattr(cause, "cause", None)
    return exc


def ray_get(refs, timeout: float | None = None):
    """`ray.get`, with a user error raised in an actor re-raised as itself rather than
    wrapped in Ray's task or actor errors. `timeout`: seconds, then GetTimeoutError."""
    try:
        return ray.get(refs, timeout=timeout)
    except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as exc:
        found = unwrap(exc)
        if found is exc:
            raise
        raise found from None


def payload_bytes(obj: Any) -> int:
    """Bytes of the tensors in a payload (what one `ray.put` ships)."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, Shares):  # the entries' vector (its addressing is a few numpy arrays)
        return payload_bytes(obj.values)
    if isinstance(obj, dict):
        return sum(payload_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(payload_bytes(v) for v in obj)
    return 0


INLINE_PAYLOAD_BYTES = 64 * 1024
"""Payloads up to this size are sent with each host call rather than put in the object
store (Ray passes arguments below its `max_direct_call_object_size`, 100 KiB, inline)."""


class RayPool:
    """Client hosts as Ray actors named `clients-<j>`; implements `Pool`. The actors come
    from `hosts` (engine/host_actors.py): started for this run and killed at its end
    (`FreshHosts`, the default), or kept from a previous run and reset (`ReusedHosts`)."""

    def __init__(self, resolved: Resolved, namespace: str | None = None, placement_group: Any = None,
                 run: str | None = None, hosts: HostSource | None = None):
        cfg = resolved.config
        self.n_clients = resolved.n_clients
        # Decided and checked in one place (engine/placement.py): a placement that cannot
        # fit is a ConfigError here, before any host starts, never a wait.
        self.placement = plan_placement(cfg, self.n_clients, extra_bundles=0 if placement_group is None else 1)
        self.blocks = self.placement.blocks
        self._starts = [block[0] if len(block) else 0 for block in self.blocks]
        self.bytes_sent = 0
        self.timeout = cfg.host_timeout_s
        self.healthy = True
        """False once a call on the hosts failed or timed out: they are not reused."""
        self.hosts: HostSource = hosts if hosts is not None else FreshHosts()
        self.actors: list[Any] = []
        self.actors = self.hosts.acquire(resolved, self.placement, placement_group, namespace, self._get,
                                         run=run or namespace)

    def owner(self, cid: int) -> int:
        """The host j whose block holds client `cid` (a search over the blocks' first ids:
        no table of the population's length)."""
        return bisect_right(self._starts, cid) - 1

    def map(self, phase: str, round_: int, counts: dict[int, int], payload: dict[str, Any], reduce: bool = True,
            count: bool = False, dispatch: int = 0, probe: bool = False) -> Any:
        per_host: dict[int, list[tuple[int, int]]] = {}
        for cid, mult in sorted(counts.items()):
            per_host.setdefault(self.owner(cid), []).append((cid, mult))
        size = payload_bytes(payload)
        self.bytes_sent += size
        # A large payload goes to the object store once, shared by all hosts; a small one
        # travels inside each call (no put, no store round trip: ~2.5 ms less per map).
        ref = ray.put(payload) if size > INLINE_PAYLOAD_BYTES else payload
        hosts = sorted(per_host)
        futures = [self.actors[j].map.remote(phase, round_, per_host[j], ref, reduce, count, dispatch, probe) for j in hosts]
        answers = self._get(futures, f"phase {phase!r} of round {round_}", hosts)
        if not count:
            return combine(answers, reduce)
        costs = MemberCosts()
        for _, part in answers:  # each host's members (O(m) in all)
            costs.merge(part)
        return combine([result for result, _ in answers], reduce), costs

    def _get(self, futures: list, what: str, hosts: list[int]) -> list:
        """The hosts' answers, waiting at most `host_timeout_s`; a HostTimeoutError names
        the hosts that did not answer."""
        try:
            _, pending = ray.wait(futures, num_returns=len(futures), timeout=self.timeout)
            if pending:
                late = ", ".join(f"clients-{j}" for j, f in zip(hosts, futures) if f in pending)
                raise HostTimeoutError(f"host actor(s) {late} did not answer {what} within {self.timeout:g} s (--host-timeout)")
            return ray_get(futures)
        except BaseException:
            self.healthy = False
            raise

    def _all(self, method: str, what: str, args: list[tuple] | None = None) -> list:
        futures = [getattr(a, method).remote(*(args[j] if args else ())) for j, a in enumerate(self.actors)]
        return self._get(futures, what, list(range(len(self.actors))))

    def client_state(self, cid: int) -> State:
        j = self.owner(cid)
        return self._get([self.actors[j].client_state.remote(cid)], "client_state", [j])[0]

    def client_states(self) -> dict[int, State]:
        out: dict[int, State] = {}
        for part in self._all("client_states", "gathering client states"):
            out.update(part)
        return out

    def load_client_states(self, states: dict[int, State]) -> None:
        parts: list[dict[int, State]] = [{} for _ in self.actors]
        for cid, s in states.items():
            parts[self.owner(cid)][cid] = s
        self._all("load_client_states", "restoring client states", [(p,) for p in parts])

    def busy_seconds(self) -> list[float]:
        return [s["busy_seconds"] for s in self._all("stats", "stats")]

    def stats(self) -> dict[str, Any]:
        """One call to every host (in parallel): busy seconds per host (`host_busy_s`, by
        actor name), their max and mean, and the payload bytes put in the object store."""
        busy = self.busy_seconds()
        return {
            "host_busy_max_s": max(busy),
            "host_busy_mean_s": sum(busy) / len(busy),
            "host_busy_s": {f"clients-{j}": b for j, b in enumerate(busy)},
            "bytes_sent": float(self.bytes_sent),
        }

    def close(self) -> None:
        """Give the hosts back to their source (killed, or kept for the next run)."""
        actors, self.actors = self.actors, []
        if actors:
            self.hosts.release(actors, self.healthy)
