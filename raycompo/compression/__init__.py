"""Payload transforms: compression of what clients send (and what the server sends down)
and client-level differential privacy, applied by the engine at the exchange, counted by
the ledger at their encoded size (docs/compression.md).

* `methods`: qsgd, topk, randk, sign on a (k, d) batch of rows, and their message sizes;
* `keys`: how an algorithm's contribution keys travel (value, update of a payload key, weight);
* `uplink`: a contribution on its way up, an ordered list of steps (compression with error
  feedback, DP clipping, the user's own) between the update taken and the value decoded;
* `privacy`: the Gaussian noise on the server's sum and the accountant (dp-accounting).

Pure torch (and dp-accounting for the accountant); nothing here imports the engine.
"""

from raycompo.compression.keys import VALUE, WEIGHT, Sent, update
from raycompo.compression.methods import METHODS, Method, compress, parse_method

__all__ = ["METHODS", "VALUE", "WEIGHT", "Method", "Sent", "compress", "parse_method", "update"]
