"""Small Omniglot folders in torchvision's layout, for the tests:
root/omniglot-py/images_{background,evaluation}/<Alphabet>/<character>/<image>.png."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_omniglot(
    root: Path,
    alphabets: int,
    characters: int,
    images: int,
    size: int = 12,
    evaluation: int = 1,
    seed: int = 0,
) -> list[str]:
    """`alphabets` alphabets (the last `evaluation` of them in images_evaluation), each
    with `characters` characters of `images` black-on-white PNGs of size x size. A
    character's images are noisy copies of one random stroke pattern. Returns the
    alphabets' names as '<half>/<Alphabet>'."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    names = []
    for a in range(alphabets):
        half = "images_evaluation" if a >= alphabets - evaluation else "images_background"
        alphabet = f"Alphabet_{a:02d}"
        names.append(f"{half}/{alphabet}")
        for c in range(characters):
            folder = Path(root) / "omniglot-py" / half / alphabet / f"character{c + 1:02d}"
            folder.mkdir(parents=True, exist_ok=True)
            pattern = rng.random((size, size)) < 0.3
            for i in range(images):
                strokes = pattern ^ (rng.random((size, size)) < 0.05)
                pixels = np.where(strokes, 0, 255).astype(np.uint8)  # black strokes on white
                Image.fromarray(pixels, mode="L").save(folder / f"{c:04d}_{i + 1:02d}.png")
    return names
