"""cluster/*.yaml pass Ray's own cluster-config checks (the JSON schema and the defaults
merge `ray up` does) and install this package pinned as pyproject.toml pins it. No cloud
and no SSH: `ray up` itself needs machines (see cluster/README.md for what was run)."""

import copy
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "cluster"

prepare_config = pytest.importorskip("ray.autoscaler._private.util").prepare_config
validate_config = pytest.importorskip("ray.autoscaler._private.util").validate_config


def load(name: str) -> dict:
    return yaml.safe_load((CLUSTER / name).read_text())


def pins() -> dict[str, str]:
    deps = re.findall(r'"([A-Za-z0-9_.\-\[\],]+)==([0-9.]+)"', (ROOT / "pyproject.toml").read_text())
    return dict(deps)


@pytest.mark.parametrize("name", ["local.yaml", "cloud-gpu.yaml"])
def test_ray_up_configs_validate_and_install_the_pinned_package(name):
    cfg = load(name)
    prepared = prepare_config(copy.deepcopy(cfg))  # what `ray up` does before touching a node
    validate_config(prepared)
    setup = " ".join(cfg["setup_commands"])
    for pkg, version in pins().items():
        assert f"{pkg}=={version}" in setup, f"{name}: setup_commands must pin {pkg}=={version} like pyproject.toml"
    assert "pip install -q -e ~/raycompo" in setup and cfg["file_mounts"]["~/raycompo"] == "."
    assert all("--metrics-export-port" in c for c in cfg["head_start_ray_commands"] + cfg["worker_start_ray_commands"] if " start " in c)


def test_local_config_has_placeholders_to_fill():
    cfg = load("local.yaml")
    assert cfg["provider"]["type"] == "local"
    assert cfg["provider"]["head_ip"] == "HEAD_IP" and all(ip.startswith("WORKER_IP") for ip in cfg["provider"]["worker_ips"])


def test_cloud_config_has_a_cpu_head_and_gpu_workers():
    cfg = prepare_config(load("cloud-gpu.yaml"))
    types = cfg["available_node_types"]
    head = types[cfg["head_node_type"]]
    workers = [t for name, t in types.items() if name != cfg["head_node_type"]]
    assert "GPU" not in head["resources"]
    assert workers and all(t["resources"].get("GPU", 0) >= 1 for t in workers)
    assert cfg["provider"]["type"] == "aws"


def test_fake_multinode_config_validates():
    # The installed Ray lacks fake_multi_node/example.yaml (the defaults prepare_config would
    # merge), so the file spells out every field and is checked against the schema directly.
    cfg = load("fake-multinode.yaml")
    validate_config(cfg)
    assert cfg["provider"]["type"] == "fake_multinode" and cfg["provider"]["disable_node_updaters"]
