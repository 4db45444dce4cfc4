"""A user's own algorithm and task, named by 'file.py:Class', 'module:Class', an entry
point or the class itself: found, validated, listed, run on every backend with the same
rows, and found again by --resume (raycompo/configuration/plugins.py)."""

from __future__ import annotations

import shutil
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

import raycompo
from raycompo.configuration import plugins
from raycompo.errors import ConfigError

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "my_algorithm.py"
SMALL = {"gamma": 1.0, "n_clients": 4, "big_client_size": 200, "small_client_size": 20, "val_per_client": 20}


def frames_close(a: pd.DataFrame, b: pd.DataFrame, tol: float = 1e-6) -> float:
    """Max |a - b| over the numeric columns but the timings; the columns must match."""
    assert list(a.columns) == list(b.columns)
    cols = [c for c in a.columns if "time" not in c and a[c].dtype.kind in "fi"]
    diff = float((a[cols] - b[cols]).abs().max().max())
    assert diff <= tol, diff
    return diff


@pytest.fixture
def plugin_file(tmp_path):
    """A copy of examples/my_algorithm.py in a folder of its own."""
    path = tmp_path / "user" / "algo.py"
    path.parent.mkdir()
    shutil.copy(EXAMPLE, path)
    return path


def test_file_spec_runs_from_cli_and_records_code(plugin_file, tmp_path, capsys):
    from raycompo.run import main
    from raycompo.runfolder.results import read_config

    out = tmp_path / "run"
    code = main(["--algo", f"{plugin_file}:ScgdMomentum", "--backend", "inline", "--rounds", "2",
                 "--set", "gamma=1", "n_clients=4", "big_client_size=200", "small_client_size=20",
                 "val_per_client=20", "--out", str(out), "--quiet"])
    assert code == 0
    cfg = read_config(out)
    assert cfg["algo"] == f"{plugin_file.resolve()}:ScgdMomentum"
    assert cfg["code"]["algo"]["source_sha256"] == plugins.source_digest(plugins.load("algorithm", cfg["algo"]))
    assert "code" not in cfg or "task" not in cfg["code"]  # a built-in task records no code
    assert len(pd.read_csv(out / "metrics.csv")) == 3


def test_list_shows_a_plugin_and_its_settings(plugin_file):
    from raycompo.run import list_choices

    text = list_choices(algo=f"{plugin_file}:ScgdMomentum")
    block = text[text.index(f"{plugin_file}:ScgdMomentum"):]
    assert "(your own)" in block.splitlines()[0]
    assert "server_momentum = 0.5  Server momentum mu" in block
    assert "comfedl" in text  # the built-ins are still listed


def test_module_spec_and_a_class_object(tmp_path, monkeypatch):
    pkg = tmp_path / "mylab"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    shutil.copy(EXAMPLE, pkg / "algos.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    cls = plugins.load("algorithm", "mylab.algos:ScgdMomentum")
    assert cls.__name__ == "ScgdMomentum" and cls.name == "scgd-momentum"
    assert plugins.spec_of(cls, "algorithm") == "mylab.algos:ScgdMomentum"
    a = raycompo.run("dro-mnist5k", "mylab.algos:ScgdMomentum", rounds=2, settings=SMALL)
    b = raycompo.run("dro-mnist5k", cls, rounds=2, settings=SMALL)
    assert a.config["algo"] == b.config["algo"] == "mylab.algos:ScgdMomentum"
    frames_close(a.metrics, b.metrics, 0.0)


@pytest.mark.parametrize("spec, message", [
    ("no-such-algo", "unknown algorithm 'no-such-algo'; choose one of: "),
    ("missing.py:X", "no such file 'missing.py'"),
    ("raycompo.algorithms.comfedl:Nope", "has no 'Nope'; its algorithm classes: ComFedL"),
    ("raycompo.tasks.dro_mnist:DroMnist5k", "not a subclass of raycompo's Algorithm"),
    ("no_such_module_xyz:A", "cannot import module 'no_such_module_xyz'"),
])
def test_bad_specs_are_one_clear_error(spec, message):
    with pytest.raises(ConfigError, match=None) as err:
        raycompo.run("dro-mnist5k", spec, rounds=1)
    assert message in str(err.value)


def test_a_file_that_fails_to_import_names_the_file(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("import raycompo\nraise RuntimeError('boom')\n")
    with pytest.raises(ConfigError, match=r"importing .*broken.py failed: RuntimeError: boom"):
        plugins.load("algorithm", f"{bad}:X")


def test_setting_collision_with_a_builtin_names_both_owners(tmp_path):
    path = tmp_path / "clash.py"
    path.write_text(textwrap.dedent(EXAMPLE.read_text()).replace(
        '    beta: float = 0.5\n', '    beta: float = 0.5\n    n_clients: int = 3\n    """clash"""\n'))
    with pytest.raises(ConfigError) as err:
        raycompo.run("dro-mnist5k", f"{path}:ScgdMomentum", rounds=1)
    msg = str(err.value)
    assert "setting 'n_clients' is declared by task" in msg and f"algo scgd-momentum ({path}:ScgdMomentum)" in msg


def test_plugin_settings_are_validated(plugin_file):
    with pytest.raises(ConfigError, match="server_momentum must be in"):
        raycompo.run("dro-mnist5k", f"{plugin_file}:ScgdMomentum", rounds=1,
                     settings={**SMALL, "server_momentum": 1.5})
    with pytest.raises(ConfigError, match="unknown setting"):
        raycompo.run("dro-mnist5k", f"{plugin_file}:ScgdMomentum", rounds=1, settings={"nope": 1})


def _dist(tmp_path: Path, group_lines: str, name: str = "mylab_ext") -> None:
    """An installed distribution with entry points, as pip would leave it."""
    info = tmp_path / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(group_lines)


def test_entry_points_register_names(tmp_path, monkeypatch):
    pkg = tmp_path / "mylab_ext"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    shutil.copy(EXAMPLE, pkg / "algos.py")
    _dist(tmp_path, "[raycompo.algorithms]\nscgd-mom = mylab_ext.algos:ScgdMomentum\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "scgd-mom" in raycompo.list_algorithms()
    assert "comfedl" in raycompo.list_algorithms()
    result = raycompo.run("dro-mnist5k", "scgd-mom", rounds=1, settings=SMALL)
    assert result.config["algo"] == "scgd-mom"
    from raycompo.run import list_choices

    assert "scgd-mom  (package mylab_ext)" in list_choices()


def test_a_package_installed_after_the_first_look_is_found(tmp_path, monkeypatch):
    """The installed entry points are read once per state of sys.path (configuration/plugins.py):
    a distribution installed into a folder already on it changes that folder, so it is seen."""
    pkg = tmp_path / "mylab_late"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    shutil.copy(EXAMPLE, pkg / "algos.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "scgd-late" not in raycompo.list_algorithms()
    _dist(tmp_path, "[raycompo.algorithms]\nscgd-late = mylab_late.algos:ScgdMomentum\n", name="mylab_late")
    assert "scgd-late" in raycompo.list_algorithms()


def test_trials_starting_together_read_the_entry_points_once(monkeypatch):
    """A population's trials look their names up at once, from threads: one of them reads the
    installed entry points, the others wait for it and share them."""
    import threading

    reads = []
    real = plugins.metadata.entry_points

    def counted():
        reads.append(1)
        return real()

    monkeypatch.setattr(plugins.metadata, "entry_points", counted)
    plugins._INSTALLED.clear()
    start = threading.Barrier(8)
    found = []

    def look():
        start.wait(timeout=30)
        found.append(plugins._entry_points_installed())

    threads = [threading.Thread(target=look) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(found) == 8 and len(reads) == 1 and all(f is found[0] for f in found)


def test_an_entry_point_edited_in_place_or_another_current_folder_is_seen(tmp_path, monkeypatch):
    """The key of the entry points' cache changes when a distribution's entry_points.txt is
    rewritten in place (its folder's time does not change) and, for sys.path's '' entry, when
    the current directory is another one."""
    import os

    pkg = tmp_path / "mylab_edit"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    shutil.copy(EXAMPLE, pkg / "algos.py")
    _dist(tmp_path, "[raycompo.algorithms]\nscgd-a = mylab_edit.algos:ScgdMomentum\n", name="mylab_edit")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "scgd-a" in raycompo.list_algorithms()
    points = tmp_path / "mylab_edit-1.0.dist-info" / "entry_points.txt"
    before = os.stat(tmp_path).st_mtime_ns
    points.write_text("[raycompo.algorithms]\nscgd-a = mylab_edit.algos:ScgdMomentum\nscgd-b = mylab_edit.algos:ScgdMomentum\n")
    stamp = os.stat(points).st_mtime_ns + 10**9  # a second later, whatever the file system's clock resolution
    os.utime(points, ns=(stamp, stamp))
    assert os.stat(tmp_path).st_mtime_ns == before  # the folder looks unchanged
    assert {"scgd-a", "scgd-b"} <= set(raycompo.list_algorithms())
    here, there = tmp_path / "here", tmp_path / "there"
    for folder, name in ((here, "scgd-here"), (there, "scgd-there")):
        folder.mkdir()
        _dist(folder, f"[raycompo.algorithms]\n{name} = mylab_edit.algos:ScgdMomentum\n", name=name.replace("-", "_"))
        os.utime(folder, ns=(before, before))  # the two folders at the same time
    monkeypatch.syspath_prepend("")
    monkeypatch.chdir(here)
    assert "scgd-here" in raycompo.list_algorithms()
    monkeypatch.chdir(there)
    names = raycompo.list_algorithms()
    assert "scgd-there" in names and "scgd-here" not in names


def test_entry_point_shadowing_a_builtin_is_an_error(tmp_path, monkeypatch):
    _dist(tmp_path, "[raycompo.algorithms]\ncomfedl = raycompo.algorithms.fedavg:FedAvg\n", name="shadow")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError) as err:
        raycompo.list_algorithms()
    assert "declared by raycompo (built-in algorithm raycompo.algorithms.comfedl.ComFedL)" in str(err.value)
    assert "package shadow" in str(err.value)


def test_resume_finds_a_file_plugin_from_another_folder(plugin_file, tmp_path, monkeypatch):
    out = tmp_path / "run"
    monkeypatch.chdir(plugin_file.parent)
    straight = raycompo.run("dro-mnist5k", "algo.py:ScgdMomentum", rounds=6, settings=SMALL)
    raycompo.run("dro-mnist5k", "algo.py:ScgdMomentum", rounds=4, settings=SMALL, out=out, checkpoint_every=2)
    monkeypatch.chdir(tmp_path)  # the relative spec would not be found from here
    resumed = raycompo.resume(out, rounds=6)
    assert resumed.status == "completed"
    frames_close(resumed.metrics, straight.metrics, 1e-12)
    frames_close(pd.read_csv(out / "metrics.csv"), straight.metrics, 1e-9)


@pytest.mark.slow
def test_plugin_on_ray_equals_inline_and_needs_no_file_there(ray_session, plugin_file, tmp_path):
    """The hosts rebuild the class from its pickle: with the file gone they could not import it."""
    cls = plugins.load("algorithm", f"{plugin_file}:ScgdMomentum")
    inline = raycompo.run("dro-mnist5k", cls, rounds=3, settings=SMALL)
    plugin_file.unlink()
    sys.modules.pop(cls.__module__)  # as on a node that never saw the file
    remote = raycompo.run("dro-mnist5k", cls, rounds=3, settings=SMALL, backend="ray", clients_per_actor=2,
                          cpus_per_actor=0.25)
    assert remote.config["placement"]["hosts"] == 2  # recorded without out= too
    frames_close(inline.metrics, remote.metrics, 1e-6)


@pytest.mark.slow
def test_class_defined_in_a_function_runs_on_ray(ray_session):
    """Like a class of a notebook or a script's __main__: not importable anywhere by name."""
    from dataclasses import dataclass

    @dataclass
    class DampedSettings(raycompo.LocalSettings):
        shrink: float = 0.5
        """Server step: w <- w + shrink * (mean_i w_i - w)."""

    class Damped(raycompo.Algorithm):
        Settings = DampedSettings  # no `name`: the class name is used

        def server_round(self, ctx, w, state):
            sums = ctx.map("local", ctx.sample(ctx.n_clients), {"w": w})
            return w + self.s.shrink * (sums["w"] / sums["k"] - w), state

        @raycompo.client_phase("local")
        def local(self, c, state, payload):
            g = lambda w, b, t: self.loss_grad(w, b)  # noqa: E731
            return {"w": raycompo.local_sgd(c, payload["w"], self.s.tau, self.s.lr, self.s.batch_size, g), "k": 1.0}, state

    small = {k: v for k, v in SMALL.items() if k != "gamma"}
    inline = raycompo.run("dro-mnist5k", Damped, rounds=2, settings=small)
    remote = raycompo.run("dro-mnist5k", Damped, rounds=2, settings=small, backend="ray", clients_per_actor=2,
                          cpus_per_actor=0.25)
    assert inline.config["algo"].endswith(":test_class_defined_in_a_function_runs_on_ray.<locals>.Damped")
    assert inline.metrics["train_loss"].iloc[-1] < inline.metrics["train_loss"].iloc[0]
    frames_close(inline.metrics, remote.metrics, 1e-6)


def test_public_api_names_resolve_and_are_documented():
    import inspect

    for name in raycompo.__all__:
        obj = getattr(raycompo, name)
        doc = inspect.getdoc(obj)
        assert doc and len(doc) > 20, f"raycompo.{name} has no docstring"
    from raycompo import Algorithm, ClientData, LocalSettings, Task, client_phase  # noqa: F401  (as users write it)

    assert callable(raycompo.run) and callable(raycompo.tune)


def test_config_does_not_import_the_engine():
    """config.py sits below engine/: importing it loads no engine module (no import circle)."""
    import subprocess

    code = "import sys, raycompo.configuration.config; print(sorted(m for m in sys.modules if m.startswith('raycompo.engine')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         timeout=120).stdout
    assert out.strip() == "[]"


# --- a regression task: an algorithm asks for what it uses, not for a kind of task -------
@dataclass
class LeastSquaresSettings:
    n_clients: int = 5
    n_features: int = 4
    samples: int = 24
    """Training and validation samples per client (equal: FedAvg's n_i-weighted mean is the plain one)."""

    def validate(self) -> None:
        raycompo.require(self.n_clients >= 1 and self.samples >= 2, "n_clients >= 1 and samples >= 2")


class LeastSquares(raycompo.Task):
    """y = x w* + noise, half the squared error: a loss and its gradient, no classes, no
    accuracy. It declares 'loss' only."""

    name = "least-squares"
    Settings = LeastSquaresSettings
    capabilities = frozenset({"loss"})
    default_metric = ("val_loss_worst", "min")
    worst = {"train_loss": "max", "val_loss": "max"}

    @property
    def n_clients(self) -> int:
        return self.settings.n_clients

    def build_module(self):
        import torch

        return torch.nn.Linear(self.settings.n_features, 1)

    def partition(self):
        import torch

        s = self.settings
        g = torch.Generator().manual_seed(self.seed)
        w_true = torch.randn(s.n_features, 1, generator=g)

        def draw():
            x = torch.randn(s.samples, s.n_features, generator=g)
            return x, x @ w_true + 0.1 * torch.randn(s.samples, 1, generator=g)

        return [raycompo.ClientData(c, *draw(), *draw()) for c in range(s.n_clients)]

    def loss(self, w, batch):
        x, y = batch
        return 0.5 * ((self.model(w, x) - y) ** 2).mean()

    def evaluate(self, w, client):
        import torch

        with torch.no_grad():
            return {"train_loss": float(self.loss(w, (client.x, client.y))),
                    "val_loss": float(self.loss(w, (client.x_val, client.y_val)))}


def test_fedavg_runs_a_least_squares_task_synchronously_and_buffered():
    """FedAvg uses a loss and its gradient, and so do FedBuff and FedAsync (its local phase):
    a task that declares 'loss' alone runs them, evaluated by its loss (no accuracy column).
    With C = K = n equal, always-online clients, constant weight and eta_g = 1, FedBuff's
    rows are the synchronous ones. An algorithm that needs a classifier still says so."""
    from tests.helpers import assert_rows_close

    settings = {"tau": 2, "lr": 0.1, "batch_size": 8}
    sync = raycompo.run(LeastSquares, "fedavg", rounds=4, settings=settings, system="uniform")
    assert sync.status == "completed" and "val_acc" not in sync.metrics.columns
    loss = sync.metrics["val_loss_worst"]
    assert loss.iloc[-1] < loss.iloc[0] / 2
    buff = raycompo.run(LeastSquares, "fedavg", rounds=4, settings={**settings, "staleness": "constant"},
                        system="uniform", aggregation="buffered", concurrency=5, buffer=5)
    keep = [c for c in sync.rows[0] if c not in ("round_time", "wall_time", "sim_time", "exchanges")]
    assert_rows_close([{k: r[k] for k in keep} for r in sync.rows], [{k: r[k] for k in keep} for r in buff.rows],
                      tol=1e-6)
    fa = raycompo.run(LeastSquares, "fedavg", rounds=3, settings=settings, system="uniform", aggregation="async",
                      concurrency=2)
    assert fa.status == "completed" and fa.metrics["train_loss"].iloc[-1] < fa.metrics["train_loss"].iloc[0]
    with pytest.raises(ConfigError, match="algorithm ditto needs a task with classification; task least-squares has "
                                          "loss"):
        raycompo.run(LeastSquares, "ditto", rounds=1, settings=settings)
