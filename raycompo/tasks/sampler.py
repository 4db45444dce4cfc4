"""How a run draws its clients' mini-batches (RunConfig.sampler, issue 41): 'keyed', the
counter-based keyed draws of raycompo/keyed.py (`keyed_indices`: a chunk's every client and
step at once; `keyed_draw`: one row), the default after release 0.1.1; or 'randperm', the
draws of the releases up to it (`randperm(n_i)[:b]` from a generator reseeded per client and
step), which a run folder, checkpoint or sweep written by them records by leaving the
setting out (RECORDED_BEFORE). The setting also picks how the uplink's compression draws
its random levels and entries (raycompo/compression/uplink.py: `Compress`)."""

from __future__ import annotations

from typing import Any

from raycompo.keyed import as_int64, keyed_draw, keyed_indices

__all__ = ["DEFAULT_SAMPLER", "RECORDED_BEFORE", "SAMPLERS", "as_int64", "keyed_draw", "keyed_indices", "sampler_of"]

SAMPLERS = ("randperm", "keyed")
"""How a client's mini-batch indices are drawn from its generator (RunConfig.sampler):
'randperm' (`randperm(n_i)[:b]`, the draws of releases up to 0.1.1; compression's draws from
a generator per member) or 'keyed' (`keyed_indices`; compression's draws keyed too)."""
DEFAULT_SAMPLER = "keyed"
"""RunConfig.sampler's default."""
RECORDED_BEFORE = "randperm"
"""The sampler of a record that names none (config.json, a checkpoint's fingerprint,
sweep.json): one written before the setting existed or before 'keyed' was the default."""


def sampler_of(record: Any) -> str:
    """The sampler a record ran with (a config.json or sweep.json dict, a checkpoint's
    fingerprint, a RunConfig): its `sampler`, or RECORDED_BEFORE where it names none."""
    found = record.get("sampler") if isinstance(record, dict) else getattr(record, "sampler", None)
    return RECORDED_BEFORE if found is None else found
