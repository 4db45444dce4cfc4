"""The simulated system (issue 26): devices, availability, a clock and a deadline policy.

It sits below `config` (which validates a profile through it) and the engine (which drives
it) and imports only `raycompo.errors`, `settings`, `seeding` and `costs`:

* `profile`: what a system is (built-ins `uniform` and `mobile`, YAML files), validated;
* `ranges`: the values its files may hold (numbers in any written form, each quantity's range);
* `devices`: per-client compute and network, drawn from (seed, client id) or read from a CSV;
* `availability`: who is online when (always, Bernoulli, diurnal, a trace; or a plugin);
* `selection`: who joins a round (`deadline`: over-selection and a deadline; or a plugin),
  with `deadline`'s arithmetic and `candidates`, the O(m) draw of online candidates;
* `clock`: the one formula of a member's time (`member_time`), the clock and predictions;
* `counters`: per-client counts since the last evaluation, and the run's totals;
* `dropped`: what the dropped candidates of a round received, sent and computed;
* `persist`: the state a checkpoint keeps;
* `simulator`: `System`, the parts composed behind the interface the engine calls, and
  `NoSystem`, the same interface doing nothing.

See docs/system.md.
"""

from raycompo.system.profile import PROFILES, Profile, canonical_system, load_profile
from raycompo.system.simulator import (
           COLUMNS,
           NoSystem,
           System,
           SystemLike,
           check_profile,
           make_system,
)

__all__ = ["COLUMNS", "PROFILES", "NoSystem", "Profile", "System", "SystemLike", "canonical_system", "check_profile",
           "load_profile", "make_system"]
