"""Tasks from a user's own data in one call, without subclassing anything.

    from raycompo.tasks.from_data import task_from_arrays
    MyTask = task_from_arrays(x, y, n_clients=20, partition="dirichlet", dirichlet_alpha=0.1)

Each factory returns a new `Task` class (not an instance), as the engine wants it: it
builds `task_cls(settings, seed, data_dir)` in every process. The class carries the data
(torch tensors), a name, and a `Settings` dataclass whose defaults are the call's values,
so `--set dirichlet_alpha=0.5` or a sweep overrides them like any task setting.

The class's `__module__` is the caller's module (never `raycompo.*`, so the registry of
built-in tasks does not list it), and its `__qualname__` names the factory's locals, so
Ray's cloudpickle ships it by value, data included.
"""

from __future__ import annotations

import dataclasses
import operator
import sys
import typing
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from raycompo.configuration.arguments import Arg, check
from raycompo.data.partitioners import check_params
from raycompo.data.user_arrays import check_label_range, checked_pair, data_sha256
from raycompo.errors import ConfigError
from raycompo.settings import require
from raycompo.tasks.user_data import ArraysSettings, ArraysTask, ClientsSettings, ClientsTask
from raycompo.tasks.user_spec import check_loss, check_model

OUTSIDE_MODULE = "__raycompo_user__"
"""`__module__` of a class made from inside raycompo itself (kept out of the registry)."""

ModelSpec = str | Callable[[], nn.Module]
LossFn = Callable[..., torch.Tensor]


COMMON_ARGS = {
    "val_fraction": Arg(("number",), above=0, below=1), "loss": Arg(("callable",), none=True),
    "num_classes": Arg(("int",), at_least=2, none=True), "name": Arg(("str",)),
    "partition_seed": Arg(("int",), at_least=0, none=True),
}
"""What `task_from_arrays` and `task_from_clients` accept besides the data (raycompo.configuration.arguments);
`model` is checked by building it (`user_spec.check_model`)."""
ARRAYS_ARGS = {**COMMON_ARGS, "n_clients": Arg(("int",), at_least=1), "partition": Arg(("str",))}


def _caller_module(depth: int = 2) -> str:
    name = sys._getframe(depth).f_globals.get("__name__", "__main__")
    return OUTSIDE_MODULE if name == "raycompo" or name.startswith("raycompo.") else name


def _settings_class(base: type, defaults: dict[str, Any], module: str, owner: str) -> type:
    """A subclass of the settings dataclass `base` whose fields default to `defaults`
    (field docs stay on `base`, where `--list` finds them)."""
    hints = typing.get_type_hints(base)
    # A parameter of a partitioner added to PARTITIONERS by the user becomes a field too.
    fields = [(k, hints.get(k, type(v)), dataclasses.field(default=v)) for k, v in defaults.items()]
    cls = dataclasses.make_dataclass("Settings", fields, bases=(base,))
    cls.__module__ = module
    cls.__qualname__ = f"{owner}.<locals>.Settings"
    cls.__doc__ = base.__doc__
    cls().validate()
    return cls


def _task_class(base: type, name: str, namespace: dict[str, Any], module: str, owner: str, doc: str) -> type:
    require(isinstance(name, str) and name.strip() != "", f"name must be a non-empty string, got {name!r}")
    attrs = {"__module__": module, "__qualname__": f"{owner}.<locals>.{base.__name__}", "__doc__": doc}
    return type(base.__name__, (base,), {**attrs, "name": name, **namespace})


def _int(value: Any, what: str) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise ConfigError(f"{what} must be an integer, got {value!r}") from None


def _num_classes(num_classes: int | None, labels: list[torch.Tensor]) -> int:
    top = max(int(y.max()) for y in labels)
    c = top + 1 if num_classes is None else _int(num_classes, "num_classes")
    require(
        c >= 2,
        f"num_classes must be an integer >= 2, got {c!r}"
        + (" (the labels hold only class 0; pass num_classes)" if num_classes is None else ""),
    )
    return c


def _spec(model: ModelSpec, loss: LossFn | None, x: torch.Tensor, y: torch.Tensor, c: int) -> dict[str, Any]:
    """Check model and loss on two samples; the class attribute `spec`."""
    module = check_model(model, x[:2], c)
    with torch.no_grad():
        reduces = check_loss(loss, module(x[:2]), y[:2])
    return {"model": model, "loss": loss, "sample_losses": reduces}


def _capabilities(spec: dict[str, Any]) -> frozenset[str]:
    caps = ArraysTask.capabilities
    return caps if spec["sample_losses"] else caps - {"sample_losses"}


def task_from_arrays(
    x: Any,
    y: Any,
    *,
    n_clients: int,
    partition: str = "iid",
    x_val: Any = None,
    y_val: Any = None,
    val_fraction: float = 0.2,
    model: ModelSpec = "logistic",
    loss: LossFn | None = None,
    num_classes: int | None = None,
    name: str = "arrays",
    partition_seed: int | None = None,
    **partition_params: Any,
) -> type[ArraysTask]:
    """A task class on a pooled data set split over `n_clients` clients.

    x: features (samples, ...), y: integer labels 0..C-1 (samples,); numpy or torch.
    partition: a name in `raycompo.data.partitioners.PARTITIONERS` (iid, dirichlet, shards,
    dominant, step); `partition_params` are its parameters (e.g. dirichlet_alpha=0.1,
    shards_per_client=2, rho=0.8, step_keep=50). The partition is seeded by the run's seed,
    or by `partition_seed` when given.
    Validation: each client holds out `val_fraction` of its samples, or, with x_val/y_val,
    gets len(y_val) // n_clients samples drawn from them with its own training class
    proportions.
    model: 'logistic', 'mlp', or a no-argument callable returning a torch.nn.Module;
    loss: None (cross-entropy) or loss(logits, y) -> mean (see `raycompo.tasks.user_spec`).
    num_classes: None = the largest label + 1.
    Raises ConfigError naming the problem (bad arrays, unknown names, too few samples)."""
    owner, module = "task_from_arrays", _caller_module()
    a = check("raycompo.task_from_arrays", locals(), ARRAYS_ARGS)
    n_clients, val_fraction, num_classes, partition_seed = (a["n_clients"], a["val_fraction"], a["num_classes"],
                                                            a["partition_seed"])
    xt, yt = checked_pair(x, y, "the data (x, y)", "x", "y")
    require((x_val is None) == (y_val is None), "give both x_val and y_val, or neither")
    val = None
    if x_val is not None:
        val = checked_pair(x_val, y_val, "the validation data (x_val, y_val)", "x_val", "y_val")
        require(
            val[0].shape[1:] == xt.shape[1:],
            f"x_val has samples of shape {tuple(val[0].shape[1:])}, x of shape {tuple(xt.shape[1:])}",
        )
    c = _num_classes(num_classes, [yt] + ([val[1]] if val else []))
    check_label_range(yt, c, "y")
    if val is not None:
        check_label_range(val[1], c, "y_val")
    n_clients = _int(n_clients, "n_clients")
    require(n_clients >= 1, f"n_clients must be >= 1, got {n_clients}")
    require(len(yt) >= n_clients, f"too few samples: {len(yt)} samples for {n_clients} clients")
    check_params(partition, partition_params)  # an unknown partitioner is a ConfigError too
    defaults = {"n_clients": n_clients, "partition": partition, "val_fraction": val_fraction,
                "partition_seed": partition_seed, **partition_params}
    spec = _spec(model, loss, xt, yt, c)
    tensors = [xt, yt, *(val or ())]
    return _task_class(
        ArraysTask, name,
        {
            "Settings": _settings_class(ArraysSettings, defaults, module, owner),
            "x": xt, "y": yt,
            "x_val": val[0] if val else None, "y_val": val[1] if val else None,
            "num_classes": c, "in_features": int(xt[0].numel()),
            "data_sha256": data_sha256(*tensors), "spec": spec, "capabilities": _capabilities(spec),
        },
        module, owner,
        f"Task {name!r} from task_from_arrays: {len(yt)} samples, {c} classes, "
        f"split over clients by {partition!r}.",
    )


def task_from_clients(
    clients: Sequence[tuple[Any, Any]],
    *,
    val: Sequence[tuple[Any, Any]] | None = None,
    val_fraction: float = 0.2,
    model: ModelSpec = "logistic",
    loss: LossFn | None = None,
    num_classes: int | None = None,
    name: str = "clients",
    partition_seed: int | None = None,
) -> type[ClientsTask]:
    """A task class whose client i trains on `clients[i]` = (x_i, y_i) exactly.

    Arrays are numpy or torch: features (n_i, ...) of one per-sample shape for all
    clients, integer labels 0..C-1. `val`: one (x_val_i, y_val_i) per client; without it
    each client holds out `val_fraction` of its samples (seeded by the run's seed or
    `partition_seed`). model, loss, num_classes: as in `task_from_arrays`.
    Raises ConfigError naming the problem (bad arrays, an empty client, wrong lengths)."""
    owner, module = "task_from_clients", _caller_module()
    a = check("raycompo.task_from_clients", locals(), COMMON_ARGS)
    val_fraction, num_classes, partition_seed = a["val_fraction"], a["num_classes"], a["partition_seed"]
    data, vals = _clients_data(clients, val)
    shape = data[0][0].shape[1:]
    everything = data + (vals or [])
    c = _num_classes(num_classes, [yi for _, yi in everything])
    for i, (_, yi) in enumerate(data):
        check_label_range(yi, c, f"client {i}'s labels")
    for i, (_, yi) in enumerate(vals or []):
        check_label_range(yi, c, f"validation labels of client {i}")
    spec = _spec(model, loss, data[0][0], data[0][1], c)
    n = sum(len(yi) for _, yi in data)
    return _task_class(
        ClientsTask, name,
        {
            "Settings": _settings_class(
                ClientsSettings, {"val_fraction": val_fraction, "partition_seed": partition_seed}, module, owner
            ),
            "clients_data": tuple(data), "clients_val": tuple(vals) if vals is not None else None,
            "num_classes": c, "in_features": int(shape.numel()),
            "data_sha256": data_sha256(*(t for pair in everything for t in pair)),
            "spec": spec, "capabilities": _capabilities(spec),
        },
        module, owner,
        f"Task {name!r} from task_from_clients: {len(data)} clients, {n} training samples, {c} classes.",
    )


def _clients_data(clients: Sequence[tuple[Any, Any]], val: Sequence[tuple[Any, Any]] | None
                  ) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], list[tuple[torch.Tensor, torch.Tensor]] | None]:
    """`task_from_clients`' (x, y) of each client and, with `val`, its validation pair, as
    tensors, checked: one per-sample shape, and without `val` at least 2 samples per client."""
    require(
        isinstance(clients, Sequence) and len(clients) > 0,
        "clients must be a non-empty list of (x, y) pairs, one per client",
    )
    data = _pairs(clients, "client")
    vals = None
    if val is None:
        for i, (_, yi) in enumerate(data):
            require(len(yi) >= 2, f"client {i} has 1 sample: it needs at least 2 to hold out a validation set (or pass val)")
    else:
        require(
            isinstance(val, Sequence) and len(val) == len(data),
            f"val must hold one (x_val, y_val) pair per client: {len(data)} clients, "
            f"got {len(val) if isinstance(val, Sequence) else type(val).__name__}",
        )
        vals = _pairs(val, "validation data of client")
    shape = data[0][0].shape[1:]
    for what, group in (("client", data), ("validation data of client", vals or [])):
        for i, (xi, _) in enumerate(group):
            require(
                xi.shape[1:] == shape,
                f"{what} {i} has samples of shape {tuple(xi.shape[1:])}, client 0 of shape {tuple(shape)}",
            )
    return data, vals


def _pairs(items: Sequence, what: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each item an (x, y) pair of tensors, checked (`what` i names item i in a message)."""
    out = []
    for i, item in enumerate(items):
        require(
            isinstance(item, (tuple, list)) and len(item) == 2,
            f"{what} {i} must be an (x, y) pair, got {type(item).__name__}",
        )
        out.append(checked_pair(item[0], item[1], f"{what} {i}", f"{what} {i}'s features", f"{what} {i}'s labels"))
    return out
