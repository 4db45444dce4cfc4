"""The simulated system (issue 26): devices, availability, a clock and a deadline policy.

It sits below `config` (which validates a profile through it) and the engine (which drives
it) and imports only `raycompo.errors`, `settings`, `seeding` and `costs`:

* `profile`: what a system is (built-ins `uniform` and `mobile`, YAML files), validated;
* `devices`: per-client compute and network, drawn from (seed, client id) or read from a CSV;
* `availability`: who is online when (always, Bernoulli, diurnal, a trace);
* `clock`: an exchange's simulated time, the slowest member's;
* `deadline`: over-selection and the deadline;
* `simulator`: `System`, one run's clock and counters, which the engine calls.

See docs/system.md.
"""

from raycompo.system.profile import PROFILES, Profile, canonical_system, load_profile
from raycompo.system.simulator import COLUMNS, NoSystem, System, check_profile, make_system

__all__ = ["COLUMNS", "PROFILES", "NoSystem", "Profile", "System", "canonical_system", "check_profile",
           "load_profile", "make_system"]
