#!/bin/sh
# Every run of this claim, one per line (PYTHONPATH or an installed raycompo).
set -e
python -m raycompo.run --task maml-sinusoid --algo local-bsgd --rounds 200 --seed 0 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/scgdm-fig2/runs/local-bsgd-s0 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-bsgd --rounds 200 --seed 1 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/scgdm-fig2/runs/local-bsgd-s1 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-bsgd --rounds 200 --seed 2 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/scgdm-fig2/runs/local-bsgd-s2 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-bsgd --rounds 200 --seed 3 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/scgdm-fig2/runs/local-bsgd-s3 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-bsgd --rounds 200 --seed 4 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/scgdm-fig2/runs/local-bsgd-s4 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgd --rounds 200 --seed 0 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/scgdm-fig2/runs/local-scgd-s0 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgd --rounds 200 --seed 1 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/scgdm-fig2/runs/local-scgd-s1 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgd --rounds 200 --seed 2 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/scgdm-fig2/runs/local-scgd-s2 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgd --rounds 200 --seed 3 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/scgdm-fig2/runs/local-scgd-s3 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgd --rounds 200 --seed 4 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/scgdm-fig2/runs/local-scgd-s4 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-moml --rounds 200 --seed 0 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/scgdm-fig2/runs/local-moml-s0 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-moml --rounds 200 --seed 1 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/scgdm-fig2/runs/local-moml-s1 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-moml --rounds 200 --seed 2 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/scgdm-fig2/runs/local-moml-s2 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-moml --rounds 200 --seed 3 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/scgdm-fig2/runs/local-moml-s3 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-moml --rounds 200 --seed 4 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/scgdm-fig2/runs/local-moml-s4 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 0 --backend inline --threads 1 --quiet --eval-every 10 --set per_task_state=False --out reproductions/scgdm-fig2/runs/local-scgdm-shared-s0 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 1 --backend inline --threads 1 --quiet --eval-every 10 --set per_task_state=False --out reproductions/scgdm-fig2/runs/local-scgdm-shared-s1 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 2 --backend inline --threads 1 --quiet --eval-every 10 --set per_task_state=False --out reproductions/scgdm-fig2/runs/local-scgdm-shared-s2 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 3 --backend inline --threads 1 --quiet --eval-every 10 --set per_task_state=False --out reproductions/scgdm-fig2/runs/local-scgdm-shared-s3 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 4 --backend inline --threads 1 --quiet --eval-every 10 --set per_task_state=False --out reproductions/scgdm-fig2/runs/local-scgdm-shared-s4 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 0 --backend inline --threads 1 --quiet --eval-every 10 --set per_task_state=True --out reproductions/scgdm-fig2/runs/local-scgdm-pertask-s0 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 1 --backend inline --threads 1 --quiet --eval-every 10 --set per_task_state=True --out reproductions/scgdm-fig2/runs/local-scgdm-pertask-s1 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 2 --backend inline --threads 1 --quiet --eval-every 10 --set per_task_state=True --out reproductions/scgdm-fig2/runs/local-scgdm-pertask-s2 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 3 --backend inline --threads 1 --quiet --eval-every 10 --set per_task_state=True --out reproductions/scgdm-fig2/runs/local-scgdm-pertask-s3 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 4 --backend inline --threads 1 --quiet --eval-every 10 --set per_task_state=True --out reproductions/scgdm-fig2/runs/local-scgdm-pertask-s4 --overwrite
