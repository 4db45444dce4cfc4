"""Local-SCGDM section 5.2: federated few-shot classification on Omniglot.

The 50 alphabets (background and evaluation halves together) are split 33/5/12 into
train/validation/test by a fixed seeded permutation (`split_seed`, not the run seed, so
every run sees the same split; the paper follows Vinyals et al.'s 33/5/12 without listing
the alphabets). Each training alphabet is one client (33 clients).

An N-way K-shot episode inside an alphabet: N distinct classes, K support and
`k_query` (15) query images per class, labels 0..N-1 in random order. Augmentation by
rotations of multiples of 90 degrees: with `rotation_classes` (default, as Finn et al.)
a rotated character is a class of its own, so an alphabet of C characters has 4C
classes; otherwise each sampled class gets one random rotation. Model: the 4-layer CNN
of Finn et al. (64 filters 3x3, batch norm with batch statistics, ReLU, 2x2 max-pool);
inner learning rate 0.4; cross-entropy.

Metrics (losses and accuracies after `eval_steps` adaptation steps on the support set):
- train_loss / train_acc: `eval_tasks` fixed episodes from the client's own alphabet;
- val_loss / val_acc: `eval_tasks` fixed episodes per client from the validation
  alphabets (so 33 x eval_tasks validation episodes in all, averaged over clients).
The test alphabets are never loaded during training.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from raycompo.data.omniglot import characters, load_alphabet, omniglot_alphabets
from raycompo.errors import ConfigError
from raycompo.models import CNN4
from raycompo.seeding import DATA, generator, numpy_rng
from raycompo.settings import require
from raycompo.tasks.meta import MetaTask, TaskSample

ROTATIONS = 4


@dataclass
class OmniglotSettings:
    n_way: int = 5
    """N classes per episode (paper: 5 and 20)."""
    k_shot: int = 1
    """K support images per class (paper: 1 and 5)."""
    k_query: int = 15
    """Query images per class (paper: 15)."""
    maml_inner_lr: float = 0.4
    """Inner (adaptation) learning rate lambda (paper: 0.4)."""
    n_train_alphabets: int = 33
    """Training alphabets, one per client (paper: 33)."""
    n_val_alphabets: int = 5
    """Validation alphabets (paper: 5)."""
    n_test_alphabets: int = 12
    """Test alphabets, held out (paper: 12)."""
    split_seed: int = 0
    """Seed of the alphabets' train/validation/test permutation (fixed across runs)."""
    rotation_classes: bool = True
    """Rotations by 90, 180, 270 degrees make new classes (Finn et al.); false: a random rotation per class."""
    image_size: int = 28
    """Images are resized to image_size x image_size (paper: 28)."""
    hidden: int = 64
    """Filters per convolution of the 4-layer CNN (paper: 64)."""
    eval_tasks: int = 3
    """Fixed episodes per client for the metrics, from its own alphabet and from the validation alphabets."""
    eval_steps: int = 1
    """Adaptation steps (of size maml_inner_lr) before measuring an episode (training uses 1)."""

    def validate(self) -> None:
        require(self.n_way >= 2, f"n_way must be >= 2, got {self.n_way}")
        require(self.k_shot >= 1 and self.k_query >= 1, f"k_shot and k_query must be >= 1, got {self.k_shot} and {self.k_query}")
        require(self.maml_inner_lr > 0, f"maml_inner_lr must be > 0, got {self.maml_inner_lr}")
        require(
            self.n_train_alphabets >= 1 and self.n_val_alphabets >= 1,
            f"n_train_alphabets and n_val_alphabets must be >= 1, got {self.n_train_alphabets} and "
            f"{self.n_val_alphabets}",
        )
        require(
            self.n_test_alphabets >= 0,
            f"n_test_alphabets must be >= 0, got {self.n_test_alphabets}",
        )
        require(
            self.image_size >= 16,
            f"image_size must be >= 16 (four 2x2 max-pools), got {self.image_size}",
        )
        require(self.hidden >= 1, f"hidden must be >= 1, got {self.hidden}")
        require(
            self.eval_tasks >= 1 and self.eval_steps >= 0,
            f"eval_tasks must be >= 1 and eval_steps >= 0, got {self.eval_tasks} and {self.eval_steps}",
        )


Episode = tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def episode(images: torch.Tensor, gen: torch.Generator, s: OmniglotSettings) -> Episode:
    """An N-way K-shot episode from one alphabet's images (C, n, 1, S, S)."""
    n_chars, n_imgs = images.shape[:2]
    n_classes = n_chars * ROTATIONS if s.rotation_classes else n_chars
    classes = torch.randperm(n_classes, generator=gen)[: s.n_way].tolist()
    xs, xq = [], []
    for cls in classes:
        if s.rotation_classes:
            char, rot = divmod(cls, ROTATIONS)
        else:
            char, rot = cls, int(torch.randint(ROTATIONS, (1,), generator=gen))
        pick = torch.randperm(n_imgs, generator=gen)[: s.k_shot + s.k_query].to(images.device)
        imgs = torch.rot90(images[char, pick], rot, dims=(-2, -1))
        xs.append(imgs[: s.k_shot])
        xq.append(imgs[s.k_shot :])
    labels = torch.arange(s.n_way, device=images.device)
    return (
        (torch.cat(xs), labels.repeat_interleave(s.k_shot)),
        (torch.cat(xq), labels.repeat_interleave(s.k_query)),
    )


@dataclass
class OmniglotClient:
    """One training alphabet, and fixed episodes for the metrics."""

    client_id: int
    alphabet: str
    images: torch.Tensor
    settings: OmniglotSettings
    train_eval: list[Episode]
    val: list[Episode]
    samples_read: int = field(default=0, compare=False, repr=False)
    """Episodes handed out by `batch` so far (a meta-learning sample is a task): the ledger's count."""

    @property
    def num_samples(self) -> int:
        return self.images.shape[0] * self.images.shape[1]

    def batch(self, gen: torch.Generator, size: int | None) -> list[TaskSample]:
        """A meta-batch of `size` fresh episodes (None: one)."""
        self.samples_read += size or 1
        return [
            TaskSample(None, *episode(self.images, gen, self.settings)) for _ in range(size or 1)
        ]

    def to(self, device) -> OmniglotClient:
        def mv(eps):
            return [tuple((x.to(device), y.to(device)) for x, y in e) for e in eps]

        return OmniglotClient(
            self.client_id,
            self.alphabet,
            self.images.to(device),
            self.settings,
            mv(self.train_eval),
            mv(self.val),
        )


class MamlOmniglot(MetaTask):
    name = "maml-omniglot"
    Settings = OmniglotSettings
    default_metric = ("val_acc", "max")
    algo_defaults = {
        # Local-SCGDM section 5.2, 5-way 1-shot: meta lr (beta) 0.1 for all methods;
        # Local-SCGD gamma 0.99; Local-SCGDM eta 1, alpha 0.9, gamma 0.99. p and the
        # meta-batch are not given for Omniglot: p = 5 as in section 5.1, and 4 episodes
        # per client per step (ours).
        "lr": 0.1,
        "p": 5,
        "batch_size": 4,
        "local-scgd": {"gamma": 0.99},
        "local-scgdm": {"eta": 1.0, "alpha": 0.9, "gamma": 0.99},
    }

    @property
    def n_clients(self) -> int:
        self.split()  # fails early on missing data or a split that cannot be made
        return self.settings.n_train_alphabets

    def build_module(self) -> nn.Module:
        s = self.settings
        return CNN4(1, s.n_way, s.image_size, s.hidden)

    def loss(self, w: torch.Tensor, batch) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self.model(w, x), y)

    def split(self) -> dict[str, list[tuple[str, Path]]]:
        return _split(
            self.data_dir,
            self.settings.n_train_alphabets,
            self.settings.n_val_alphabets,
            self.settings.n_test_alphabets,
            self.settings.split_seed,
            self.settings.n_way,
            self.settings.rotation_classes,
        )

    def clients(self, ids: list[int]) -> list[OmniglotClient]:
        s = self.settings
        parts = self.split()
        val_images = [self._images(name, folder) for name, folder in parts["val"]]
        out = []
        for cid in ids:
            name, folder = parts["train"][cid]
            images = self._images(name, folder)
            g_train, g_val = generator(self.seed, DATA, 1, cid), generator(self.seed, DATA, 2, cid)
            train_eval = [episode(images, g_train, s) for _ in range(s.eval_tasks)]
            val = []
            for _ in range(s.eval_tasks):
                j = int(torch.randint(len(val_images), (1,), generator=g_val))
                val.append(episode(val_images[j], g_val, s))
            out.append(OmniglotClient(cid, name, images, s, train_eval, val))
        return out

    def _images(self, name: str, folder: Path) -> torch.Tensor:
        s = self.settings
        images = load_alphabet(folder, s.image_size)
        need = s.k_shot + s.k_query
        if images.shape[1] < need:
            raise ConfigError(
                f"alphabet {name} has {images.shape[1]} images per character, an episode needs "
                f"k_shot + k_query = {need}; lower k_shot or k_query"
            )
        return images

    @torch.no_grad()
    def evaluate(self, w: torch.Tensor, client: OmniglotClient) -> dict[str, float]:
        out = {}
        for prefix, episodes in (("train", client.train_eval), ("val", client.val)):
            losses, accs = [], []
            for support, (xq, yq) in episodes:
                adapted = w
                with torch.enable_grad():
                    for _ in range(self.settings.eval_steps):
                        adapted = adapted - self.settings.maml_inner_lr * torch.func.grad(self.loss)(
                            adapted, support
                        )
                logits = self.model(adapted.detach(), xq)
                losses.append(F.cross_entropy(logits, yq).item())
                accs.append((logits.argmax(1) == yq).double().mean().item())
            out[f"{prefix}_loss"] = sum(losses) / len(losses)
            out[f"{prefix}_acc"] = sum(accs) / len(accs)
        return out


@lru_cache(maxsize=8)
def _split(
    data_dir,
    n_train: int,
    n_val: int,
    n_test: int,
    split_seed: int,
    n_way: int,
    rotation_classes: bool,
):
    alphabets = omniglot_alphabets(data_dir)
    need = n_train + n_val + n_test
    if len(alphabets) < need:
        raise ConfigError(
            f"Omniglot in {data_dir or 'the default data folder'} has {len(alphabets)} alphabets; the split "
            f"{n_train}/{n_val}/{n_test} (n_train_alphabets/n_val_alphabets/n_test_alphabets) needs {need}"
        )
    order = numpy_rng(split_seed, DATA).permutation(len(alphabets))
    picked = [alphabets[i] for i in order]
    parts = {
        "train": picked[:n_train],
        "val": picked[n_train : n_train + n_val],
        "test": picked[n_train + n_val : need],
    }
    for name, folder in parts["train"] + parts["val"]:
        n_chars = len(characters(folder))
        n_classes = n_chars * ROTATIONS if rotation_classes else n_chars
        if n_way > n_classes:
            how = (
                f"{n_chars} characters x {ROTATIONS} rotations"
                if rotation_classes
                else f"{n_chars} characters"
            )
            raise ConfigError(
                f"n_way={n_way} is larger than alphabet {name}'s {n_classes} classes ({how}); lower n_way"
            )
    return parts
