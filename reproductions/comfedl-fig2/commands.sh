#!/bin/sh
# Every run of this claim, one per line (PYTHONPATH or an installed raycompo).
set -e
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 0 --backend inline --threads 1 --quiet --out reproductions/comfedl-fig2/runs/comfedl-s0 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 1 --backend inline --threads 1 --quiet --out reproductions/comfedl-fig2/runs/comfedl-s1 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 2 --backend inline --threads 1 --quiet --out reproductions/comfedl-fig2/runs/comfedl-s2 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 3 --backend inline --threads 1 --quiet --out reproductions/comfedl-fig2/runs/comfedl-s3 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 4 --backend inline --threads 1 --quiet --out reproductions/comfedl-fig2/runs/comfedl-s4 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 200 --seed 0 --backend inline --threads 1 --quiet --out reproductions/comfedl-fig2/runs/fedavg-s0 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 200 --seed 1 --backend inline --threads 1 --quiet --out reproductions/comfedl-fig2/runs/fedavg-s1 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 200 --seed 2 --backend inline --threads 1 --quiet --out reproductions/comfedl-fig2/runs/fedavg-s2 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 200 --seed 3 --backend inline --threads 1 --quiet --out reproductions/comfedl-fig2/runs/fedavg-s3 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 200 --seed 4 --backend inline --threads 1 --quiet --out reproductions/comfedl-fig2/runs/fedavg-s4 --overwrite
python -m raycompo.run --task dro-mnist5k --algo qfedavg --rounds 200 --seed 0 --backend inline --threads 1 --quiet --out reproductions/comfedl-fig2/runs/qfedavg-s0 --overwrite
python -m raycompo.run --task dro-mnist5k --algo qfedavg --rounds 200 --seed 1 --backend inline --threads 1 --quiet --out reproductions/comfedl-fig2/runs/qfedavg-s1 --overwrite
python -m raycompo.run --task dro-mnist5k --algo qfedavg --rounds 200 --seed 2 --backend inline --threads 1 --quiet --out reproductions/comfedl-fig2/runs/qfedavg-s2 --overwrite
python -m raycompo.run --task dro-mnist5k --algo qfedavg --rounds 200 --seed 3 --backend inline --threads 1 --quiet --out reproductions/comfedl-fig2/runs/qfedavg-s3 --overwrite
python -m raycompo.run --task dro-mnist5k --algo qfedavg --rounds 200 --seed 4 --backend inline --threads 1 --quiet --out reproductions/comfedl-fig2/runs/qfedavg-s4 --overwrite
python -m raycompo.run --task dro-mnist5k --algo drfl --rounds 200 --seed 0 --backend inline --threads 1 --quiet --out reproductions/comfedl-fig2/runs/drfl-s0 --overwrite
python -m raycompo.run --task dro-mnist5k --algo drfl --rounds 200 --seed 1 --backend inline --threads 1 --quiet --out reproductions/comfedl-fig2/runs/drfl-s1 --overwrite
python -m raycompo.run --task dro-mnist5k --algo drfl --rounds 200 --seed 2 --backend inline --threads 1 --quiet --out reproductions/comfedl-fig2/runs/drfl-s2 --overwrite
python -m raycompo.run --task dro-mnist5k --algo drfl --rounds 200 --seed 3 --backend inline --threads 1 --quiet --out reproductions/comfedl-fig2/runs/drfl-s3 --overwrite
python -m raycompo.run --task dro-mnist5k --algo drfl --rounds 200 --seed 4 --backend inline --threads 1 --quiet --out reproductions/comfedl-fig2/runs/drfl-s4 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 0 --backend inline --threads 1 --quiet --set gamma=0.5 --out reproductions/comfedl-fig2/runs/comfedl-g0.5-s0 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 1 --backend inline --threads 1 --quiet --set gamma=0.5 --out reproductions/comfedl-fig2/runs/comfedl-g0.5-s1 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 2 --backend inline --threads 1 --quiet --set gamma=0.5 --out reproductions/comfedl-fig2/runs/comfedl-g0.5-s2 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 3 --backend inline --threads 1 --quiet --set gamma=0.5 --out reproductions/comfedl-fig2/runs/comfedl-g0.5-s3 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 4 --backend inline --threads 1 --quiet --set gamma=0.5 --out reproductions/comfedl-fig2/runs/comfedl-g0.5-s4 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 0 --backend inline --threads 1 --quiet --set gamma=1 --out reproductions/comfedl-fig2/runs/comfedl-g1-s0 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 1 --backend inline --threads 1 --quiet --set gamma=1 --out reproductions/comfedl-fig2/runs/comfedl-g1-s1 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 2 --backend inline --threads 1 --quiet --set gamma=1 --out reproductions/comfedl-fig2/runs/comfedl-g1-s2 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 3 --backend inline --threads 1 --quiet --set gamma=1 --out reproductions/comfedl-fig2/runs/comfedl-g1-s3 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 4 --backend inline --threads 1 --quiet --set gamma=1 --out reproductions/comfedl-fig2/runs/comfedl-g1-s4 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 0 --backend inline --threads 1 --quiet --set gamma=5 --out reproductions/comfedl-fig2/runs/comfedl-g5-s0 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 1 --backend inline --threads 1 --quiet --set gamma=5 --out reproductions/comfedl-fig2/runs/comfedl-g5-s1 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 2 --backend inline --threads 1 --quiet --set gamma=5 --out reproductions/comfedl-fig2/runs/comfedl-g5-s2 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 3 --backend inline --threads 1 --quiet --set gamma=5 --out reproductions/comfedl-fig2/runs/comfedl-g5-s3 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 4 --backend inline --threads 1 --quiet --set gamma=5 --out reproductions/comfedl-fig2/runs/comfedl-g5-s4 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 0 --backend inline --threads 1 --quiet --set normalizer=lse --out reproductions/comfedl-fig2/runs/comfedl-lse-s0 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 1 --backend inline --threads 1 --quiet --set normalizer=lse --out reproductions/comfedl-fig2/runs/comfedl-lse-s1 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 2 --backend inline --threads 1 --quiet --set normalizer=lse --out reproductions/comfedl-fig2/runs/comfedl-lse-s2 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 3 --backend inline --threads 1 --quiet --set normalizer=lse --out reproductions/comfedl-fig2/runs/comfedl-lse-s3 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 --seed 4 --backend inline --threads 1 --quiet --set normalizer=lse --out reproductions/comfedl-fig2/runs/comfedl-lse-s4 --overwrite
