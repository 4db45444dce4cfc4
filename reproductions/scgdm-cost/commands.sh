#!/bin/sh
# Every run of this claim, one per line (PYTHONPATH or an installed raycompo).
set -e
python -m raycompo.run --task maml-sinusoid --algo local-bsgd --rounds 200 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/scgdm-cost/runs/local-bsgd-s0 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-bsgd --rounds 200 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/scgdm-cost/runs/local-bsgd-s1 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-bsgd --rounds 200 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/scgdm-cost/runs/local-bsgd-s2 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgd --rounds 200 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/scgdm-cost/runs/local-scgd-s0 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgd --rounds 200 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/scgdm-cost/runs/local-scgd-s1 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgd --rounds 200 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/scgdm-cost/runs/local-scgd-s2 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-moml --rounds 200 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/scgdm-cost/runs/local-moml-s0 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-moml --rounds 200 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/scgdm-cost/runs/local-moml-s1 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-moml --rounds 200 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --out reproductions/scgdm-cost/runs/local-moml-s2 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --set per_task_state=True --out reproductions/scgdm-cost/runs/local-scgdm-s0 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --set per_task_state=True --out reproductions/scgdm-cost/runs/local-scgdm-s1 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --set per_task_state=True --out reproductions/scgdm-cost/runs/local-scgdm-s2 --overwrite
