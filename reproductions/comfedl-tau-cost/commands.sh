#!/bin/sh
# Every run of this claim, one per line (PYTHONPATH or an installed raycompo).
set -e
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --budget values_up=1.6e+06 --set tau=1 normalizer=lse --out reproductions/comfedl-tau-cost/runs/tau1-s0 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --budget values_up=1.6e+06 --set tau=1 normalizer=lse --out reproductions/comfedl-tau-cost/runs/tau1-s1 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --budget values_up=1.6e+06 --set tau=1 normalizer=lse --out reproductions/comfedl-tau-cost/runs/tau1-s2 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --budget values_up=1.6e+06 --set tau=5 normalizer=lse --out reproductions/comfedl-tau-cost/runs/tau5-s0 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --budget values_up=1.6e+06 --set tau=5 normalizer=lse --out reproductions/comfedl-tau-cost/runs/tau5-s1 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --budget values_up=1.6e+06 --set tau=5 normalizer=lse --out reproductions/comfedl-tau-cost/runs/tau5-s2 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --budget values_up=1.6e+06 --set tau=10 normalizer=lse --out reproductions/comfedl-tau-cost/runs/tau10-s0 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --budget values_up=1.6e+06 --set tau=10 normalizer=lse --out reproductions/comfedl-tau-cost/runs/tau10-s1 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --budget values_up=1.6e+06 --set tau=10 normalizer=lse --out reproductions/comfedl-tau-cost/runs/tau10-s2 --overwrite
