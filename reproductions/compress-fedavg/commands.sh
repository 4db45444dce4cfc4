#!/bin/sh
# Every run of this claim, one per line (PYTHONPATH or an installed raycompo).
set -e
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 200 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/compress-fedavg/runs/fedavg-s0 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 200 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/compress-fedavg/runs/fedavg-s1 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 200 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/compress-fedavg/runs/fedavg-s2 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 200 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --compress '*=topk:0.01' --out reproductions/compress-fedavg/runs/topk-s0 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 200 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --compress '*=topk:0.01' --out reproductions/compress-fedavg/runs/topk-s1 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 200 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --compress '*=topk:0.01' --out reproductions/compress-fedavg/runs/topk-s2 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 200 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --compress '*=qsgd:4' --out reproductions/compress-fedavg/runs/qsgd-s0 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 200 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --compress '*=qsgd:4' --out reproductions/compress-fedavg/runs/qsgd-s1 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 200 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --compress '*=qsgd:4' --out reproductions/compress-fedavg/runs/qsgd-s2 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 200 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --budget bytes_up=894000 --out reproductions/compress-fedavg/runs/fedavg-at-topk-bytes-s0 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 200 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --budget bytes_up=894000 --out reproductions/compress-fedavg/runs/fedavg-at-topk-bytes-s1 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 200 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --budget bytes_up=894000 --out reproductions/compress-fedavg/runs/fedavg-at-topk-bytes-s2 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 200 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --budget bytes_up=7.874e+06 --out reproductions/compress-fedavg/runs/fedavg-at-qsgd-bytes-s0 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 200 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --budget bytes_up=7.874e+06 --out reproductions/compress-fedavg/runs/fedavg-at-qsgd-bytes-s1 --overwrite
python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 200 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --budget bytes_up=7.874e+06 --out reproductions/compress-fedavg/runs/fedavg-at-qsgd-bytes-s2 --overwrite
