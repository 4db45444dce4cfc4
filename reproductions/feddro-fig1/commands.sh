#!/bin/sh
# Every run of this claim, one per line (PYTHONPATH or an installed raycompo).
set -e
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/feddro-fig1/runs/feddro-s0 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/feddro-fig1/runs/feddro-s1 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/feddro-fig1/runs/feddro-s2 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 3 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/feddro-fig1/runs/feddro-s3 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 4 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/feddro-fig1/runs/feddro-s4 --overwrite
python -m raycompo.run --task feddro-digits-st --algo mbsgd-co --rounds 30 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/feddro-fig1/runs/mbsgd-co-s0 --overwrite
python -m raycompo.run --task feddro-digits-st --algo mbsgd-co --rounds 30 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/feddro-fig1/runs/mbsgd-co-s1 --overwrite
python -m raycompo.run --task feddro-digits-st --algo mbsgd-co --rounds 30 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/feddro-fig1/runs/mbsgd-co-s2 --overwrite
python -m raycompo.run --task feddro-digits-st --algo mbsgd-co --rounds 30 --seed 3 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/feddro-fig1/runs/mbsgd-co-s3 --overwrite
python -m raycompo.run --task feddro-digits-st --algo mbsgd-co --rounds 30 --seed 4 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/feddro-fig1/runs/mbsgd-co-s4 --overwrite
python -m raycompo.run --task feddro-digits-st --algo fastdro --rounds 30 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/feddro-fig1/runs/fastdro-s0 --overwrite
python -m raycompo.run --task feddro-digits-st --algo fastdro --rounds 30 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/feddro-fig1/runs/fastdro-s1 --overwrite
python -m raycompo.run --task feddro-digits-st --algo fastdro --rounds 30 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/feddro-fig1/runs/fastdro-s2 --overwrite
python -m raycompo.run --task feddro-digits-st --algo fastdro --rounds 30 --seed 3 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/feddro-fig1/runs/fastdro-s3 --overwrite
python -m raycompo.run --task feddro-digits-st --algo fastdro --rounds 30 --seed 4 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/feddro-fig1/runs/fastdro-s4 --overwrite
python -m raycompo.run --task feddro-digits-st --algo pdsgd --rounds 30 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/feddro-fig1/runs/pdsgd-s0 --overwrite
python -m raycompo.run --task feddro-digits-st --algo pdsgd --rounds 30 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/feddro-fig1/runs/pdsgd-s1 --overwrite
python -m raycompo.run --task feddro-digits-st --algo pdsgd --rounds 30 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/feddro-fig1/runs/pdsgd-s2 --overwrite
python -m raycompo.run --task feddro-digits-st --algo pdsgd --rounds 30 --seed 3 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/feddro-fig1/runs/pdsgd-s3 --overwrite
python -m raycompo.run --task feddro-digits-st --algo pdsgd --rounds 30 --seed 4 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/feddro-fig1/runs/pdsgd-s4 --overwrite
