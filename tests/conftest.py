"""Shared fixtures. Ray starts once per test session (ray.init costs seconds, each torch
actor 1-2 s and ~600 MB), with 2 CPUs and no dashboard."""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("RAY_DEDUP_LOGS", "0")
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")


# One torch thread in the test process: with Ray actors on the same 2 cores, torch's
# default (one thread per core) oversubscribes them and slows small models many times.
torch.set_num_threads(1)


def pytest_collection_modifyitems(config, items):
    """Tests that can never run on this machine are deselected, not skipped, so that the
    run's "skipped" count shows only real skips: `gpu` tests without a CUDA device."""
    if torch.cuda.is_available():
        return
    gpu = [item for item in items if item.get_closest_marker("gpu")]
    if gpu:
        config.hook.pytest_deselected(items=gpu)
        items[:] = [item for item in items if not item.get_closest_marker("gpu")]


@pytest.fixture(scope="session")
def ray_session():
    import ray

    from raycompo.engine.ray_start import ensure_ray

    # raycompo's own start: a private Ray whose sockets are all on loopback (a process that
    # joins it with --address, as a user's second terminal would, keeps to loopback too)
    ensure_ray(num_cpus=2, include_dashboard=False, namespace="raycompo-tests", quiet=True)
    yield ray
    ray.shutdown()
