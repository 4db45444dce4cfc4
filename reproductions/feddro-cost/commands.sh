#!/bin/sh
# Every run of this claim, one per line (PYTHONPATH or an installed raycompo).
set -e
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 0 --backend inline --threads 1 --quiet --set sync_every=8 --out reproductions/feddro-cost/runs/feddro-I8-s0 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 1 --backend inline --threads 1 --quiet --set sync_every=8 --out reproductions/feddro-cost/runs/feddro-I8-s1 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 2 --backend inline --threads 1 --quiet --set sync_every=8 --out reproductions/feddro-cost/runs/feddro-I8-s2 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 0 --backend inline --threads 1 --quiet --set sync_every=1 --out reproductions/feddro-cost/runs/feddro-I1-s0 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 1 --backend inline --threads 1 --quiet --set sync_every=1 --out reproductions/feddro-cost/runs/feddro-I1-s1 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 2 --backend inline --threads 1 --quiet --set sync_every=1 --out reproductions/feddro-cost/runs/feddro-I1-s2 --overwrite
python -m raycompo.run --task feddro-digits-st --algo fedavg-co --rounds 30 --seed 0 --backend inline --threads 1 --quiet --set sync_every=8 --out reproductions/feddro-cost/runs/fedavg-co-I8-s0 --overwrite
python -m raycompo.run --task feddro-digits-st --algo fedavg-co --rounds 30 --seed 1 --backend inline --threads 1 --quiet --set sync_every=8 --out reproductions/feddro-cost/runs/fedavg-co-I8-s1 --overwrite
python -m raycompo.run --task feddro-digits-st --algo fedavg-co --rounds 30 --seed 2 --backend inline --threads 1 --quiet --set sync_every=8 --out reproductions/feddro-cost/runs/fedavg-co-I8-s2 --overwrite
python -m raycompo.run --task feddro-digits-st --algo mbsgd-co --rounds 30 --seed 0 --backend inline --threads 1 --quiet --out reproductions/feddro-cost/runs/mbsgd-co-s0 --overwrite
python -m raycompo.run --task feddro-digits-st --algo mbsgd-co --rounds 30 --seed 1 --backend inline --threads 1 --quiet --out reproductions/feddro-cost/runs/mbsgd-co-s1 --overwrite
python -m raycompo.run --task feddro-digits-st --algo mbsgd-co --rounds 30 --seed 2 --backend inline --threads 1 --quiet --out reproductions/feddro-cost/runs/mbsgd-co-s2 --overwrite
python -m raycompo.run --task feddro-digits-st --algo fastdro --rounds 30 --seed 0 --backend inline --threads 1 --quiet --out reproductions/feddro-cost/runs/fastdro-s0 --overwrite
python -m raycompo.run --task feddro-digits-st --algo fastdro --rounds 30 --seed 1 --backend inline --threads 1 --quiet --out reproductions/feddro-cost/runs/fastdro-s1 --overwrite
python -m raycompo.run --task feddro-digits-st --algo fastdro --rounds 30 --seed 2 --backend inline --threads 1 --quiet --out reproductions/feddro-cost/runs/fastdro-s2 --overwrite
python -m raycompo.run --task feddro-digits-st --algo pdsgd --rounds 30 --seed 0 --backend inline --threads 1 --quiet --out reproductions/feddro-cost/runs/pdsgd-s0 --overwrite
python -m raycompo.run --task feddro-digits-st --algo pdsgd --rounds 30 --seed 1 --backend inline --threads 1 --quiet --out reproductions/feddro-cost/runs/pdsgd-s1 --overwrite
python -m raycompo.run --task feddro-digits-st --algo pdsgd --rounds 30 --seed 2 --backend inline --threads 1 --quiet --out reproductions/feddro-cost/runs/pdsgd-s2 --overwrite
