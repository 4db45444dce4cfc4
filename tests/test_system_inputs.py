"""A simulated system's user files as a person writes them (issue 33): numbers in every form
YAML readers leave as strings, values too large or too small for the clock refused by name,
CSV headers from a spreadsheet, a trace too small for a cohort, and a resume after an edit
told what changed. Bad input: one line, exit 2, naming the file, the field and what is
accepted."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

import raycompo
from raycompo.errors import ConfigError
from raycompo.run import main
from raycompo.system import load_profile
from raycompo.system.availability import read_trace
from raycompo.system.devices import DeviceModel
from raycompo.system.profile import Devices

DOCS = Path(__file__).resolve().parent.parent / "docs" / "system.md"
CSV_HEAD = "flops,uplink_bytes_per_s,downlink_bytes_per_s,latency_s\n"
RUN = ["--task", "synthetic", "--algo", "fedavg", "--rounds", "1", "--backend", "inline", "--quiet",
       "--set", "n_clients=20", "clients_per_round=5", "tau=2", "max_samples=60"]


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def bad_input(argv, capsys) -> str:
    """The command's one error line (exit 2)."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_the_documented_profile_runs_as_printed(tmp_path, capsys):
    """docs/system.md's YAML, copied verbatim (YAML 1.1 reads its 1.0e9 as a string)."""
    text = re.search(r"```yaml\n(.*?)```", DOCS.read_text(), re.S).group(1)
    assert "flops: 1.0e9" in text
    p = load_profile(str(write(tmp_path, "mine.yaml", text)))
    assert [(c.name, c.flops) for c in p.devices.classes] == [("low", 1e9), ("high", 2e10)]
    assert (p.devices.uplink_bytes_per_s.median, p.devices.downlink_bytes_per_s.median) == (6.25e5, 2.5e6)
    assert main([*RUN, "--system", str(tmp_path / "mine.yaml")]) == 0


@pytest.mark.parametrize("written", ["1e9", "1E9", "1.0e9", "1.0e+9", "+1e9", "1_000_000_000", "1000000000",
                                     "1000000000.0", "'1e9'", "0.001e12"])
def test_every_number_form_a_person_writes(tmp_path, written):
    p = load_profile(str(write(tmp_path, "p.yaml", f"devices: {{classes: [{{name: a, flops: {written}}}], "
                                                   f"latency_s: 5e-2}}\nselection: {{max_attempts: 1e1}}\n")))
    assert p.devices.classes[0].flops == 1e9 and p.devices.latency_s.median == 0.05
    assert p.selection.max_attempts == 10


@pytest.mark.parametrize("text, message", [
    ("devices: {classes: [{name: a, flops: '1,000'}]}\n",
     r"classes\[0\]: flops must be a finite number \(e.g. 6, 0.05, 1e9, 1.0e\+9, 1_000\), got '1,000'"),
    ("devices: {flop_per_sample_per_param: 1.0e+308}\n", r"flop_per_sample_per_param must be in \[0, 1e\+09\], got 1e\+308"),
    ("devices: {classes: [{name: a, flops: 1.0e-320}]}\n", r"flops must be in \[1, 1e\+20\]"),
    ("devices: {uplink_bytes_per_s: {median: 1.0e+300, sigma: 1}}\n", r"uplink_bytes_per_s.median must be in \[1, 1e\+15\]"),
    ("availability: {kind: bernoulli, p: 0.5, slot_s: 1.0e-320}\n", r"slot_s must be in \[0.001, 1e\+12\]"),
    ("availability: {kind: trace, path: t.csv, period_s: 1.0e-320}\n", r"period_s must be in \[0.001, 1e\+12\]"),
    ("selection: {deadline_s: 1.0e+308}\n", r"deadline_s must be in \(0, 1e\+12\]"),
    ("selection: {deadline_s: 1, max_attempts: 1000000000}\n", r"max_attempts must be an integer in \[1, 1000\]"),
    ("selection: {max_attempts: 2.5}\n", r"max_attempts must be an integer in \[1, 1000\], got 2.5"),
    ("devices: {csv: d.csv, classes: [{name: a, flops: 1e9}]}\n", "csv replaces the drawn devices .* not both"),
])
def test_values_the_clock_cannot_take_are_refused_by_name(tmp_path, text, message):
    write(tmp_path, "t.csv", "client,start_s,end_s\n0,0,1\n")
    write(tmp_path, "d.csv", CSV_HEAD + "1e9,1e5,1e6,0.1\n")
    with pytest.raises(ConfigError, match=message):
        load_profile(str(write(tmp_path, "p.yaml", text)))


def test_huge_values_from_the_command_line_exit_2_naming_file_and_field(tmp_path, capsys):
    write(tmp_path, "p.yaml", "devices: {flop_per_sample_per_param: 1.0e+308}\n")
    err = bad_input([*RUN, "--system", str(tmp_path / "p.yaml")], capsys)
    assert str(tmp_path / "p.yaml") in err and "flop_per_sample_per_param must be in [0, 1e+09]" in err
    write(tmp_path, "d.csv", CSV_HEAD + "1e-300,1e5,1e6,0.1\n")
    write(tmp_path, "q.yaml", "devices: {csv: d.csv}\n")
    err = bad_input([*RUN, "--system", str(tmp_path / "q.yaml")], capsys)
    assert f"device CSV {tmp_path / 'd.csv'}: line 2: flops=1e-300 must be a number in [1, 1e+20]" in err


def test_class_weights_of_any_finite_size_are_drawn_by_their_ratio():
    """Two classes of weight 1e308 (their sum overflows): each is drawn half of the time, as
    with weights 1 and 1."""
    from raycompo.system.profile import DeviceClass

    spec = Devices(classes=(DeviceClass("a", 1e308, 1e9), DeviceClass("b", 1e308, 2e9)))
    got = Counter(DeviceModel(spec, 0, 10**6, 10).device(c).cls for c in range(2000))
    same = Devices(classes=(DeviceClass("a", 1.0, 1e9), DeviceClass("b", 1.0, 2e9)))
    assert got == Counter(DeviceModel(same, 0, 10**6, 10).device(c).cls for c in range(2000))
    assert abs(got["a"] - 1000) < 150  # binomial(2000, 1/2): sd 22


def test_an_unmeetable_deadline_ends_within_max_attempts(tmp_path):
    """The most attempts a profile may allow, every one abandoned: a ConfigError, not a spin."""
    p = write(tmp_path, "p.yaml", "selection: {over_selection: 2, deadline_s: 1.0e-9, max_attempts: 1000}\n")
    with pytest.raises(ConfigError, match="abandoned 1000 times in a row"):
        raycompo.run("synthetic", "fedavg", rounds=1, system=p,
                     settings={"n_clients": 20, "clients_per_round": 5, "tau": 2, "max_samples": 60})


def test_device_csv_header_twice_is_refused_and_a_byte_order_mark_is_read(tmp_path):
    dup = write(tmp_path, "dup.csv", "flops,uplink_bytes_per_s,downlink_bytes_per_s,latency_s,flops\n1e9,1,1,0,2e9\n")
    with pytest.raises(ConfigError, match=f"device CSV {dup}: the header names column.s. 'flops' more than once"):
        DeviceModel(Devices(csv=str(dup)), 0, 2, 10)
    bom = tmp_path / "excel.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + (CSV_HEAD + "3e9,1e5,1e6,0.1\n").encode())
    assert DeviceModel(Devices(csv=str(bom)), 0, 2, 10).device(1).flops == 3e9
    trace = tmp_path / "trace.csv"
    trace.write_bytes(b"\xef\xbb\xbfclient,start_s,end_s\r\n0,0,10\r\n")
    assert read_trace(str(trace), 1, None) == {0: ([0.0], [10.0])}


def test_a_trace_naming_fewer_clients_than_a_cohort_is_bad_input(tmp_path, capsys):
    write(tmp_path, "t.csv", "client,start_s,end_s\n" + "".join(f"{c},0,100000\n" for c in range(3)))
    for selection in ("", "selection: {deadline_s: 100}\n"):
        write(tmp_path, "p.yaml", "availability: {kind: trace, path: t.csv}\n" + selection)
        err = bad_input([*RUN, "--system", str(tmp_path / "p.yaml"), "--out", str(tmp_path / "run")], capsys)
        assert f"availability trace {tmp_path / 't.csv'} names 3 client(s)" in err
        assert "clients_per_round=5" in err and "deadline" not in err
        assert not (tmp_path / "run").exists()  # refused before the run's folder is made


def _resume_after(tmp_path, edit, capsys) -> str:
    write(tmp_path, "d.csv", CSV_HEAD + "1e9,1e5,1e6,0.1\n")
    write(tmp_path, "p.yaml", "devices: {csv: d.csv}\nselection: {over_selection: 1.5}\n")
    out = str(tmp_path / "run")
    assert main([*RUN, "--system", str(tmp_path / "p.yaml"), "--out", out, "--checkpoint-every", "1"]) == 0
    edit()
    capsys.readouterr()
    return bad_input(["--resume", out, "--rounds", "2", "--quiet"], capsys)


def test_resume_after_an_edited_device_csv_names_it(tmp_path, capsys):
    err = _resume_after(tmp_path, lambda: write(tmp_path, "d.csv", CSV_HEAD + "2e9,1e5,1e6,0.1\n"), capsys)
    assert f"the device CSV {tmp_path / 'd.csv'} was edited" in err and "another run" not in err
    assert len(err.replace(str(tmp_path), "")) < 300  # brief: no whole records


def test_resume_after_an_edited_profile_names_the_field(tmp_path, capsys):
    err = _resume_after(tmp_path, lambda: write(tmp_path, "p.yaml", "devices: {csv: d.csv}\n"
                                                "selection: {over_selection: 2}\n"), capsys)
    assert "selection.over_selection 1.5 then, 2 now" in err and "another run" not in err
    assert len(err.replace(str(tmp_path), "")) < 300  # brief: no whole records


def test_config_records_the_devices_used(tmp_path):
    """With a device CSV, config.json's profile holds the CSV (not the default distributions
    it replaces); an availability kind's record holds its own fields."""
    write(tmp_path, "d.csv", CSV_HEAD + "1e9,1e5,1e6,0.1\n")
    write(tmp_path, "p.yaml", "devices: {csv: d.csv}\navailability: {kind: bernoulli, p: 0.5}\n")
    raycompo.run("synthetic", "fedavg", rounds=1, system=tmp_path / "p.yaml", out=tmp_path / "run",
                 settings={"n_clients": 20, "clients_per_round": 5, "tau": 2, "max_samples": 60})
    recorded = json.loads((tmp_path / "run" / "config.json").read_text())["system_profile"]
    assert recorded["devices"] == {"csv": str(tmp_path / "d.csv"), "csv_sha256": recorded["devices"]["csv_sha256"],
                                   "flop_per_sample_per_param": 6.0}
    assert recorded["availability"] == {"kind": "bernoulli", "p": 0.5, "slot_s": 600.0}
    drawn = raycompo.run("synthetic", "fedavg", rounds=1, system="mobile",
                         settings={"n_clients": 20, "clients_per_round": 5, "tau": 2, "max_samples": 60}).config
    assert "csv" not in drawn["system_profile"]["devices"] and len(drawn["system_profile"]["devices"]["classes"]) == 3


def test_changes_between_records_are_named_briefly(tmp_path):
    """What a refused resume names: a moved file by its path (not two digests), an edited one
    as edited; a checkpoint's record from before records kept only the used fields (every
    field of the devices) describes the same system as the new one."""
    import dataclasses

    from raycompo.system.profile import Availability, Profile, changes

    trace = write(tmp_path, "t.csv", "client,start_s,end_s\n0,0,10\n")
    a = Profile("x", Devices(csv="/a/d.csv", csv_sha256="1" * 64), Availability("trace", path=str(trace)))
    write(tmp_path, "t.csv", "client,start_s,end_s\n0,0,20\n")
    b = Profile("x", Devices(csv="/b/d.csv", csv_sha256="3" * 64), Availability("trace", path=str(trace)))
    assert a.availability.sha256 != b.availability.sha256  # (the section digests its file)
    assert changes(a.record(), b.record()) == ["devices.csv /a/d.csv then, /b/d.csv now",
                                               f"the availability trace {trace} was edited (its sha256 differs)"]
    assert changes({**a.record(), "devices": dataclasses.asdict(a.devices)}, a.record()) == []
