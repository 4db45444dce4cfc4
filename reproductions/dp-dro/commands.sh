#!/bin/sh
# Every run of this claim, one per line (PYTHONPATH or an installed raycompo).
set -e
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 100 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/dp-dro/runs/fedavg-s0 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 100 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/dp-dro/runs/fedavg-s1 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 100 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/dp-dro/runs/fedavg-s2 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 100 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --dp-clip 0.5 --dp-delta 1e-05 --dp-noise 0.5 --out reproductions/dp-dro/runs/fedavg-z0.5-s0 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 100 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --dp-clip 0.5 --dp-delta 1e-05 --dp-noise 0.5 --out reproductions/dp-dro/runs/fedavg-z0.5-s1 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 100 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --dp-clip 0.5 --dp-delta 1e-05 --dp-noise 0.5 --out reproductions/dp-dro/runs/fedavg-z0.5-s2 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 100 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --dp-clip 0.5 --dp-delta 1e-05 --dp-noise 2 --out reproductions/dp-dro/runs/fedavg-z2-s0 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 100 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --dp-clip 0.5 --dp-delta 1e-05 --dp-noise 2 --out reproductions/dp-dro/runs/fedavg-z2-s1 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 100 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --dp-clip 0.5 --dp-delta 1e-05 --dp-noise 2 --out reproductions/dp-dro/runs/fedavg-z2-s2 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 100 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --set gamma=1 --out reproductions/dp-dro/runs/comfedl-s0 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 100 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --set gamma=1 --out reproductions/dp-dro/runs/comfedl-s1 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 100 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --set gamma=1 --out reproductions/dp-dro/runs/comfedl-s2 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 100 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --dp-clip 0.5 --dp-delta 1e-05 --dp-noise 0.5 --set gamma=1 --out reproductions/dp-dro/runs/comfedl-z0.5-s0 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 100 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --dp-clip 0.5 --dp-delta 1e-05 --dp-noise 0.5 --set gamma=1 --out reproductions/dp-dro/runs/comfedl-z0.5-s1 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 100 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --dp-clip 0.5 --dp-delta 1e-05 --dp-noise 0.5 --set gamma=1 --out reproductions/dp-dro/runs/comfedl-z0.5-s2 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 100 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --dp-clip 0.5 --dp-delta 1e-05 --dp-noise 2 --set gamma=1 --out reproductions/dp-dro/runs/comfedl-z2-s0 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 100 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --dp-clip 0.5 --dp-delta 1e-05 --dp-noise 2 --set gamma=1 --out reproductions/dp-dro/runs/comfedl-z2-s1 --overwrite
python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 100 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --dp-clip 0.5 --dp-delta 1e-05 --dp-noise 2 --set gamma=1 --out reproductions/dp-dro/runs/comfedl-z2-s2 --overwrite
