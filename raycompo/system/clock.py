"""The simulated clock of a synchronous round.

One exchange (one `ctx.map`) is a barrier: the server sends the payload to every member,
waits for every member's contribution, then goes on. Member i of an exchange finishes after

    t_i = wait_i + 2 * latency_i + bytes_down_i / downlink_i
          + samples_i * (flop_per_sample_per_param * d) / flops_i + bytes_up_i / uplink_i

seconds (d the model's size; `wait_i`: how long an offline client needed to come online,
0 for a member of a cohort drawn among online clients), and the exchange takes
max_i t_i. A round is the sum of its exchanges (FedDRO's I + 1 exchanges are I + 1
barriers, each paying a latency both ways, however few bytes they carry). Server-side
aggregation is not timed: the server is a data centre and this is a model of the devices.
"""

from __future__ import annotations

from dataclasses import dataclass

from raycompo.costs import ExchangeCost
from raycompo.system.devices import Device


def member_time(device: Device, s_per_sample: float, samples: float, bytes_down: float, bytes_up: float) -> float:
    """Seconds one member takes for one exchange once online: latency both ways, the
    payload down, its samples, its contribution up."""
    return device.transfer_s(bytes_down, bytes_up) + samples * s_per_sample


@dataclass
class Workload:
    """What one member did in one exchange (a prediction's input): samples and bytes."""

    samples: float
    bytes_down: float
    bytes_up: float


def exchange_workload(e: ExchangeCost) -> Workload:
    """The mean member's work in exchange `e` (per distinct member; a member drawn twice
    counts its double work)."""
    k = max(1, e.size)
    return Workload(sum(e.samples) / k, sum(e.bytes_down) / k, sum(e.bytes_up) / k)


def predicted_time(device: Device, s_per_sample: float, workload: list[Workload]) -> float:
    """Seconds a member would take for a round of this `workload` (its exchanges in turn;
    the barriers' waits for others are not its own)."""
    return sum(member_time(device, s_per_sample, w.samples, w.bytes_down, w.bytes_up) for w in workload)
