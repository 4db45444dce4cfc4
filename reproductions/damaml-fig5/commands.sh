#!/bin/sh
# Every run of this claim, one per line (PYTHONPATH or an installed raycompo).
set -e
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 0 --backend inline --threads 1 --quiet --set tau=1 --out reproductions/damaml-fig5/runs/tau1-s0 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 1 --backend inline --threads 1 --quiet --set tau=1 --out reproductions/damaml-fig5/runs/tau1-s1 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 2 --backend inline --threads 1 --quiet --set tau=1 --out reproductions/damaml-fig5/runs/tau1-s2 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 3 --backend inline --threads 1 --quiet --set tau=1 --out reproductions/damaml-fig5/runs/tau1-s3 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 4 --backend inline --threads 1 --quiet --set tau=1 --out reproductions/damaml-fig5/runs/tau1-s4 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 0 --backend inline --threads 1 --quiet --set tau=5 --out reproductions/damaml-fig5/runs/tau5-s0 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 1 --backend inline --threads 1 --quiet --set tau=5 --out reproductions/damaml-fig5/runs/tau5-s1 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 2 --backend inline --threads 1 --quiet --set tau=5 --out reproductions/damaml-fig5/runs/tau5-s2 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 3 --backend inline --threads 1 --quiet --set tau=5 --out reproductions/damaml-fig5/runs/tau5-s3 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 4 --backend inline --threads 1 --quiet --set tau=5 --out reproductions/damaml-fig5/runs/tau5-s4 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 0 --backend inline --threads 1 --quiet --set tau=10 --out reproductions/damaml-fig5/runs/tau10-s0 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 1 --backend inline --threads 1 --quiet --set tau=10 --out reproductions/damaml-fig5/runs/tau10-s1 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 2 --backend inline --threads 1 --quiet --set tau=10 --out reproductions/damaml-fig5/runs/tau10-s2 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 3 --backend inline --threads 1 --quiet --set tau=10 --out reproductions/damaml-fig5/runs/tau10-s3 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 4 --backend inline --threads 1 --quiet --set tau=10 --out reproductions/damaml-fig5/runs/tau10-s4 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 0 --backend inline --threads 1 --quiet --set gamma=0.1 --out reproductions/damaml-fig5/runs/gamma0.1-s0 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 1 --backend inline --threads 1 --quiet --set gamma=0.1 --out reproductions/damaml-fig5/runs/gamma0.1-s1 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 2 --backend inline --threads 1 --quiet --set gamma=0.1 --out reproductions/damaml-fig5/runs/gamma0.1-s2 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 3 --backend inline --threads 1 --quiet --set gamma=0.1 --out reproductions/damaml-fig5/runs/gamma0.1-s3 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 4 --backend inline --threads 1 --quiet --set gamma=0.1 --out reproductions/damaml-fig5/runs/gamma0.1-s4 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 0 --backend inline --threads 1 --quiet --set gamma=0.5 --out reproductions/damaml-fig5/runs/gamma0.5-s0 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 1 --backend inline --threads 1 --quiet --set gamma=0.5 --out reproductions/damaml-fig5/runs/gamma0.5-s1 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 2 --backend inline --threads 1 --quiet --set gamma=0.5 --out reproductions/damaml-fig5/runs/gamma0.5-s2 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 3 --backend inline --threads 1 --quiet --set gamma=0.5 --out reproductions/damaml-fig5/runs/gamma0.5-s3 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 4 --backend inline --threads 1 --quiet --set gamma=0.5 --out reproductions/damaml-fig5/runs/gamma0.5-s4 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 0 --backend inline --threads 1 --quiet --set gamma=1 --out reproductions/damaml-fig5/runs/gamma1-s0 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 1 --backend inline --threads 1 --quiet --set gamma=1 --out reproductions/damaml-fig5/runs/gamma1-s1 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 2 --backend inline --threads 1 --quiet --set gamma=1 --out reproductions/damaml-fig5/runs/gamma1-s2 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 3 --backend inline --threads 1 --quiet --set gamma=1 --out reproductions/damaml-fig5/runs/gamma1-s3 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 4 --backend inline --threads 1 --quiet --set gamma=1 --out reproductions/damaml-fig5/runs/gamma1-s4 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 0 --backend inline --threads 1 --quiet --set gamma=5 --out reproductions/damaml-fig5/runs/gamma5-s0 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 1 --backend inline --threads 1 --quiet --set gamma=5 --out reproductions/damaml-fig5/runs/gamma5-s1 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 2 --backend inline --threads 1 --quiet --set gamma=5 --out reproductions/damaml-fig5/runs/gamma5-s2 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 3 --backend inline --threads 1 --quiet --set gamma=5 --out reproductions/damaml-fig5/runs/gamma5-s3 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 4 --backend inline --threads 1 --quiet --set gamma=5 --out reproductions/damaml-fig5/runs/gamma5-s4 --overwrite
