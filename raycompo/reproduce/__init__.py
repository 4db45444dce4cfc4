"""One command per paper claim: `python -m raycompo.reproduce NAME` runs a claim's variants
over seeds and writes its table, figure, commands and verdict. Claims are data
(`raycompo/reproduce/claims.py`); see raycompo/reproduce/README.md."""

from raycompo.reproduce.claims import CLAIMS
from raycompo.reproduce.spec import Better, Bound, Claim, Close, Full, Panel, V, Variant

__all__ = ["CLAIMS", "Better", "Bound", "Claim", "Close", "Full", "Panel", "V", "Variant", "reproduce"]


def reproduce(*args, **kwargs):
    from raycompo.reproduce.__main__ import reproduce as _reproduce

    return _reproduce(*args, **kwargs)
