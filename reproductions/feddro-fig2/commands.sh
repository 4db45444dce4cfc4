#!/bin/sh
# Every run of this claim, one per line (PYTHONPATH or an installed raycompo).
set -e
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=1 --out reproductions/feddro-fig2/runs/I1-s0 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=1 --out reproductions/feddro-fig2/runs/I1-s1 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=1 --out reproductions/feddro-fig2/runs/I1-s2 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 3 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=1 --out reproductions/feddro-fig2/runs/I1-s3 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 4 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=1 --out reproductions/feddro-fig2/runs/I1-s4 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=2 --out reproductions/feddro-fig2/runs/I2-s0 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=2 --out reproductions/feddro-fig2/runs/I2-s1 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=2 --out reproductions/feddro-fig2/runs/I2-s2 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 3 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=2 --out reproductions/feddro-fig2/runs/I2-s3 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 4 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=2 --out reproductions/feddro-fig2/runs/I2-s4 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=4 --out reproductions/feddro-fig2/runs/I4-s0 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=4 --out reproductions/feddro-fig2/runs/I4-s1 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=4 --out reproductions/feddro-fig2/runs/I4-s2 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 3 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=4 --out reproductions/feddro-fig2/runs/I4-s3 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 4 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=4 --out reproductions/feddro-fig2/runs/I4-s4 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=8 --out reproductions/feddro-fig2/runs/I8-s0 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=8 --out reproductions/feddro-fig2/runs/I8-s1 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=8 --out reproductions/feddro-fig2/runs/I8-s2 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 3 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=8 --out reproductions/feddro-fig2/runs/I8-s3 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 4 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=8 --out reproductions/feddro-fig2/runs/I8-s4 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=16 --out reproductions/feddro-fig2/runs/I16-s0 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=16 --out reproductions/feddro-fig2/runs/I16-s1 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=16 --out reproductions/feddro-fig2/runs/I16-s2 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 3 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=16 --out reproductions/feddro-fig2/runs/I16-s3 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 4 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=16 --out reproductions/feddro-fig2/runs/I16-s4 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=32 --out reproductions/feddro-fig2/runs/I32-s0 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=32 --out reproductions/feddro-fig2/runs/I32-s1 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=32 --out reproductions/feddro-fig2/runs/I32-s2 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 3 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=32 --out reproductions/feddro-fig2/runs/I32-s3 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 4 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=32 --out reproductions/feddro-fig2/runs/I32-s4 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=64 --out reproductions/feddro-fig2/runs/I64-s0 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=64 --out reproductions/feddro-fig2/runs/I64-s1 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=64 --out reproductions/feddro-fig2/runs/I64-s2 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 3 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=64 --out reproductions/feddro-fig2/runs/I64-s3 --overwrite
python -m raycompo.run --task feddro-digits-st --algo feddro --rounds 30 --seed 4 --backend inline --threads 1 --quiet --eval-every 5 --set sync_every=64 --out reproductions/feddro-fig2/runs/I64-s4 --overwrite
