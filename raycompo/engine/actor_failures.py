"""What counts as a host actor's failure: Ray's actor and object errors, and a host that did
not answer in time. The runner recovers from these (engine/faults.py); host_actors retries a
reused host's start on them."""

from __future__ import annotations


class HostTimeoutError(RuntimeError):
    """A client-host actor did not answer within `host_timeout_s`."""


def _actor_failures() -> tuple[type[BaseException], ...]:
    try:
        import ray.exceptions as rex
    except ImportError:
        return (HostTimeoutError,)
    return (rex.RayActorError, rex.ActorUnavailableError, rex.ObjectLostError, rex.OwnerDiedError, HostTimeoutError)


ACTOR_FAILURES: tuple[type[BaseException], ...] = _actor_failures()
"""The exceptions that mean a host actor was lost or late."""
