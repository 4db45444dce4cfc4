"""System profiles and devices (raycompo/system/profile.py, devices.py): built-ins, YAML and
CSV files checked field by field, devices drawn reproducibly from (seed, client id)."""

from __future__ import annotations

import math
import statistics
from collections import Counter

import pytest

from raycompo.errors import ConfigError
from raycompo.system import PROFILES, load_profile
from raycompo.system.devices import DeviceModel
from raycompo.system.profile import Devices


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_builtins_and_unknown_names():
    assert load_profile("uniform") is PROFILES["uniform"] and load_profile("mobile") is PROFILES["mobile"]
    assert PROFILES["uniform"].plain_selection and not PROFILES["mobile"].plain_selection
    assert PROFILES["mobile-sync"].plain_selection and PROFILES["mobile-sync"].devices == PROFILES["mobile"].devices
    assert PROFILES["mobile-fastest"].selection.over_selection == 2.0 and not PROFILES["mobile-fastest"].plain_selection
    with pytest.raises(ConfigError, match=r"unknown system profile 'phones'.*uniform, mobile"):
        load_profile("phones")
    with pytest.raises(ConfigError, match="does not exist"):
        load_profile("no/such/profile.yaml")


def test_yaml_profile_every_field_read(tmp_path):
    write(tmp_path, "dev.csv", "flops,uplink_bytes_per_s,downlink_bytes_per_s,latency_s\n1e9,1e5,1e6,0.1\n")
    p = load_profile(str(write(tmp_path, "p.yaml", """
name: mine
devices: {csv: dev.csv, flop_per_sample_per_param: 4}
availability: {kind: bernoulli, p: 0.25, slot_s: 60}
selection: {over_selection: 1.5, deadline_s: 30, max_attempts: 3}
""")))
    assert p.name == "mine" and p.devices.csv == str(tmp_path / "dev.csv") and len(p.devices.csv_sha256) == 64
    assert p.devices.flop_per_sample_per_param == 4.0
    assert (p.availability.kind, p.availability.p, p.availability.slot_s) == ("bernoulli", 0.25, 60.0)
    assert (p.selection.over_selection, p.selection.deadline_s, p.selection.max_attempts) == (1.5, 30.0, 3)


@pytest.mark.parametrize("text, message", [
    ("name: x\nspeed: 3\n", r"unknown key\(s\) speed; accepted: name, description, devices, availability, selection"),
    ("devices: {flopz: 1}\n", r"unknown key\(s\) flopz; accepted: classes, flops_sigma"),
    ("availability: {kind: weekly}\n", r"kind must be one of always, bernoulli, diurnal, trace, got 'weekly'"),
    ("availability: {kind: bernoulli, online_hours: 3}\n", r"unknown key\(s\) online_hours; accepted: kind, p, slot_s"),
    ("availability: {kind: bernoulli, p: 0}\n", "no client is ever online"),
    ("availability: {kind: bernoulli, p: 0.0001}\n", r"too rarely to simulate\); give p in \[0.001, 1\]"),
    ("availability: {kind: diurnal, p_day: 0}\n", "no client is ever online"),
    ("availability: {kind: diurnal, online_hours: 0}\n", "no client is ever online"),
    ("availability: {kind: bernoulli, p: 1.5}\n", r"p must be in \[0, 1\], got 1.5"),
    ("availability: {kind: trace}\n", "needs a path"),
    ("availability: {kind: trace, path: nope.csv}\n", "nope.csv does not exist"),
    ("selection: {over_selection: 0.5}\n", r"over_selection must be in \[1, 100\], got 0.5"),
    ("selection: {deadline_s: -1}\n", r"deadline_s must be in \(0, 1e\+12\]"),
    ("selection: {max_attempts: 0}\n", r"max_attempts must be an integer in \[1, 1000\], got 0"),
    ("devices: {uplink_bytes_per_s: fast}\n", r"uplink_bytes_per_s must be a finite number \(e.g. 6, 0.05, 1e9, 1.0e\+9, 1_000\), got 'fast'"),
    ("devices: {latency_s: {median: 0.1, spread: 2}}\n", r"unknown key\(s\) spread; accepted: median, sigma"),
    ("devices: {classes: []}\n", "classes must be a non-empty list"),
    ("devices: {classes: [{name: a, weight: 1}]}\n", r"classes\[0\]: flops must be a finite number \(.*\), got None"),
    ("devices: {flops_sigma: true}\n", r"flops_sigma must be a finite number \(.*\), got True"),
    ("- a\n- b\n", "must be a YAML mapping"),
    ("devices: {a: [1, 2\n", "is not valid YAML"),
])
def test_yaml_errors_name_the_field_and_what_is_accepted(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_profile(str(write(tmp_path, "p.yaml", text)))


def test_drawn_devices_are_keyed_by_seed_and_client_and_follow_their_distributions():
    spec = PROFILES["mobile"].devices
    a = DeviceModel(spec, 0, 10**7, 1000)
    forward = [a.device(c) for c in range(5000)]
    b = DeviceModel(spec, 0, 10**7, 1000)
    assert [b.device(c) for c in reversed(range(5000))][::-1] == forward  # order does not matter
    assert DeviceModel(spec, 1, 10**7, 1000).device(3) != forward[3]
    assert a.device(9_999_999).flops > 0  # any id, no table
    classes = Counter(d.cls for d in forward)
    for c in spec.classes:  # weights 0.4 / 0.4 / 0.2: sd of a frequency ~ 0.007
        assert abs(classes[c.name] / 5000 - c.weight) < 0.03
    ups = [d.uplink for d in forward]
    assert abs(statistics.median(ups) / spec.uplink_bytes_per_s.median - 1) < 0.06
    logs = [math.log(u) for u in ups]
    assert abs(statistics.stdev(logs) - spec.uplink_bytes_per_s.sigma) < 0.05
    high = [d.flops for d in forward if d.cls == "high"]
    assert abs(statistics.median(high) / 2e10 - 1) < 0.06
    # seconds per sample = 6 d / flops: scaled by the model's size
    d = forward[0]
    assert a.seconds_per_sample(d) == pytest.approx(6 * 1000 / d.flops)
    assert DeviceModel(spec, 0, 10**7, 2000).seconds_per_sample(d) == pytest.approx(2 * a.seconds_per_sample(d))


def test_uniform_devices_are_equal():
    m = DeviceModel(PROFILES["uniform"].devices, 0, 100, 10)
    assert len({m.device(c) for c in range(100)}) == 1


def test_device_csv_by_client_and_as_a_pool(tmp_path):
    head = "client,class,flops,uplink_bytes_per_s,downlink_bytes_per_s,latency_s\n"
    path = write(tmp_path, "d.csv", head + "1,slow,1e8,1e4,1e5,0.2\n0,fast,1e10,1e6,1e7,0\n")
    m = DeviceModel(Devices(csv=str(path)), 0, 2, 10)
    assert (m.device(0).cls, m.device(0).flops, m.device(0).latency) == ("fast", 1e10, 0.0)
    assert (m.device(1).cls, m.device(1).uplink, m.device(1).downlink) == ("slow", 1e4, 1e5)
    pool = write(tmp_path, "pool.csv", "flops,uplink_bytes_per_s,downlink_bytes_per_s,latency_s\n1e8,1,1,0\n2e8,1,1,0\n")
    m = DeviceModel(Devices(csv=str(pool)), 0, 10**6, 10)
    got = Counter(m.device(c).flops for c in range(2000))
    assert set(got) == {1e8, 2e8} and abs(got[1e8] - 1000) < 150
    assert DeviceModel(Devices(csv=str(pool)), 0, 10**6, 10).device(7) == m.device(7)


@pytest.mark.parametrize("text, message", [
    ("client,flops,uplink_bytes_per_s,downlink_bytes_per_s,latency_s\n0,1,1,1,0\n5,1,1,1,0\n", "client 5 does not exist"),
    ("client,flops,uplink_bytes_per_s,downlink_bytes_per_s,latency_s\n0,1,1,1,0\n", "lists 1; missing e.g. 1"),
    ("client,flops,uplink_bytes_per_s,downlink_bytes_per_s,latency_s\n0,1,1,1,0\n0,1,1,1,0\n", "client 0 is listed twice"),
    ("flops,uplink_bytes_per_s,latency_s\n1,1,0\n", r"missing column\(s\) downlink_bytes_per_s"),
    ("flops,uplink_bytes_per_s,downlink_bytes_per_s,latency_s,gpu\n1,1,1,0,1\n", r"unknown column\(s\) gpu"),
    ("flops,uplink_bytes_per_s,downlink_bytes_per_s,latency_s\nfast,1,1,0\n", "flops='fast' is not a number"),
    ("flops,uplink_bytes_per_s,downlink_bytes_per_s,latency_s\n0,1,1,0\n", r"flops=0 must be a number in \[1, 1e\+20\]"),
    ("flops,uplink_bytes_per_s,downlink_bytes_per_s,latency_s\n1,1,1\n", "line 2 does not have"),
    ("flops,uplink_bytes_per_s,downlink_bytes_per_s,latency_s\n", "holds no device"),
])
def test_device_csv_errors(tmp_path, text, message):
    path = write(tmp_path, "d.csv", text)
    with pytest.raises(ConfigError, match=message):
        DeviceModel(Devices(csv=str(path)), 0, 2, 10)
