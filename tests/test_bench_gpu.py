"""`python -m raycompo.bench gpu` runs where there is no GPU (its 'cuda' runs on the CPU, said
so) and compares rows as it says: its figures are printed, but the row comparison it prints
must find the CPU's rows equal to themselves and the vectorized rows within float32 noise."""

from __future__ import annotations

import math
import re

from raycompo.bench import gpu


def test_the_gpu_bench_runs_without_a_gpu_and_its_rows_agree(capsys, monkeypatch):
    monkeypatch.setattr(gpu.torch.cuda, "is_available", lambda: False)
    assert gpu.main(["--m", "4", "--rounds", "1", "--no-ray", "--cnn-hidden", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("no CUDA device: every 'cuda' run below runs on the CPU")
    diffs = {(algo, v): float(d) for algo, v, d in
             re.findall(r"(fedavg|comfedl)\s+cuda inline, vectorize (off|on)\s+vs cpu inline client by client: (\S+)", out)}
    assert len(diffs) == 4
    # without CUDA, 'cuda' client by client is the CPU run itself; vectorized, the same maths batched
    assert diffs["fedavg", "off"] == 0.0 and diffs["comfedl", "off"] == 0.0
    assert diffs["fedavg", "on"] < 1e-5 and diffs["comfedl", "on"] < 1e-5
    timed = re.findall(r"^(fedavg|comfedl)\s+4\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", out, re.M)
    assert [t[0] for t in timed] == ["fedavg", "comfedl"] and all(float(x) > 0 for t in timed for x in t[1:])
    # item 4: CNN4 through vmap on the CPU only, its rows equal to the per-client ones
    cnn = re.findall(r"^cnn4 (\w+)\s+m=\s*4: .* rows vmap vs per client (\S+)", out, re.M)
    assert "no GPU here: CPU only" in out and [c[0] for c in cnn] == ["cpu"] and float(cnn[0][1]) < 1e-5


def test_max_relative_finds_the_largest_difference_and_nan():
    ref = [{"round": 0, "train_loss": 2.0, "val_acc": 0.5, "round_time": 1.0}]
    assert gpu.max_relative([{"round": 0, "train_loss": 2.0, "val_acc": 0.5, "round_time": 9.0}], ref) == (0.0, "-")
    d, at = gpu.max_relative([{"round": 0, "train_loss": 2.2, "val_acc": 0.5}], ref)
    assert math.isclose(d, 0.1) and at == "train_loss, round 0"
    assert gpu.max_relative([{"round": 0, "train_loss": float("nan"), "val_acc": 0.5}], ref)[0] == math.inf
