#!/bin/sh
# Every run of this claim, one per line (PYTHONPATH or an installed raycompo).
set -e
python -m raycompo.run --task damaml-mnist5k --algo fedavg --rounds 10 --seed 0 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/fedavg-s0 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo fedavg --rounds 10 --seed 1 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/fedavg-s1 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo fedavg --rounds 10 --seed 2 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/fedavg-s2 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo fedavg --rounds 10 --seed 3 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/fedavg-s3 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo fedavg --rounds 10 --seed 4 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/fedavg-s4 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo fedmaml --rounds 10 --seed 0 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/fedmaml-s0 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo fedmaml --rounds 10 --seed 1 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/fedmaml-s1 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo fedmaml --rounds 10 --seed 2 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/fedmaml-s2 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo fedmaml --rounds 10 --seed 3 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/fedmaml-s3 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo fedmaml --rounds 10 --seed 4 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/fedmaml-s4 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo tr-maml --rounds 10 --seed 0 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/tr-maml-s0 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo tr-maml --rounds 10 --seed 1 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/tr-maml-s1 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo tr-maml --rounds 10 --seed 2 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/tr-maml-s2 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo tr-maml --rounds 10 --seed 3 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/tr-maml-s3 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo tr-maml --rounds 10 --seed 4 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/tr-maml-s4 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo ditto --rounds 10 --seed 0 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/ditto-s0 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo ditto --rounds 10 --seed 1 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/ditto-s1 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo ditto --rounds 10 --seed 2 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/ditto-s2 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo ditto --rounds 10 --seed 3 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/ditto-s3 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo ditto --rounds 10 --seed 4 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/ditto-s4 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-maml --rounds 10 --seed 0 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/comfedl-maml-s0 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-maml --rounds 10 --seed 1 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/comfedl-maml-s1 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-maml --rounds 10 --seed 2 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/comfedl-maml-s2 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-maml --rounds 10 --seed 3 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/comfedl-maml-s3 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-maml --rounds 10 --seed 4 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/comfedl-maml-s4 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 0 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/comfedl-damaml-s0 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 1 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/comfedl-damaml-s1 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 2 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/comfedl-damaml-s2 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 3 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/comfedl-damaml-s3 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 4 --backend inline --threads 1 --quiet --out reproductions/damaml-fig4/runs/comfedl-damaml-s4 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 0 --backend inline --threads 1 --quiet --set lr=0.05 gamma=1 --out reproductions/damaml-fig4/runs/comfedl-damaml-g1-s0 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 1 --backend inline --threads 1 --quiet --set lr=0.05 gamma=1 --out reproductions/damaml-fig4/runs/comfedl-damaml-g1-s1 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 2 --backend inline --threads 1 --quiet --set lr=0.05 gamma=1 --out reproductions/damaml-fig4/runs/comfedl-damaml-g1-s2 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 3 --backend inline --threads 1 --quiet --set lr=0.05 gamma=1 --out reproductions/damaml-fig4/runs/comfedl-damaml-g1-s3 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 4 --backend inline --threads 1 --quiet --set lr=0.05 gamma=1 --out reproductions/damaml-fig4/runs/comfedl-damaml-g1-s4 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 0 --backend inline --threads 1 --quiet --set normalizer=lse --out reproductions/damaml-fig4/runs/comfedl-damaml-lse-s0 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 1 --backend inline --threads 1 --quiet --set normalizer=lse --out reproductions/damaml-fig4/runs/comfedl-damaml-lse-s1 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 2 --backend inline --threads 1 --quiet --set normalizer=lse --out reproductions/damaml-fig4/runs/comfedl-damaml-lse-s2 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 3 --backend inline --threads 1 --quiet --set normalizer=lse --out reproductions/damaml-fig4/runs/comfedl-damaml-lse-s3 --overwrite
python -m raycompo.run --task damaml-mnist5k --algo comfedl-damaml --rounds 10 --seed 4 --backend inline --threads 1 --quiet --set normalizer=lse --out reproductions/damaml-fig4/runs/comfedl-damaml-lse-s4 --overwrite
