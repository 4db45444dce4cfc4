#!/bin/sh
# Every run of this claim, one per line (PYTHONPATH or an installed raycompo).
set -e
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 1000 --seed 0 --backend inline --threads 1 --quiet --eval-every 50 --set p=1 --out reproductions/scgdm-fig4/runs/p1-s0 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 1000 --seed 1 --backend inline --threads 1 --quiet --eval-every 50 --set p=1 --out reproductions/scgdm-fig4/runs/p1-s1 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 1000 --seed 2 --backend inline --threads 1 --quiet --eval-every 50 --set p=1 --out reproductions/scgdm-fig4/runs/p1-s2 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 1000 --seed 3 --backend inline --threads 1 --quiet --eval-every 50 --set p=1 --out reproductions/scgdm-fig4/runs/p1-s3 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 1000 --seed 4 --backend inline --threads 1 --quiet --eval-every 50 --set p=1 --out reproductions/scgdm-fig4/runs/p1-s4 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 0 --backend inline --threads 1 --quiet --eval-every 10 --set p=5 --out reproductions/scgdm-fig4/runs/p5-s0 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 1 --backend inline --threads 1 --quiet --eval-every 10 --set p=5 --out reproductions/scgdm-fig4/runs/p5-s1 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 2 --backend inline --threads 1 --quiet --eval-every 10 --set p=5 --out reproductions/scgdm-fig4/runs/p5-s2 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 3 --backend inline --threads 1 --quiet --eval-every 10 --set p=5 --out reproductions/scgdm-fig4/runs/p5-s3 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 4 --backend inline --threads 1 --quiet --eval-every 10 --set p=5 --out reproductions/scgdm-fig4/runs/p5-s4 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 100 --seed 0 --backend inline --threads 1 --quiet --eval-every 5 --set p=10 --out reproductions/scgdm-fig4/runs/p10-s0 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 100 --seed 1 --backend inline --threads 1 --quiet --eval-every 5 --set p=10 --out reproductions/scgdm-fig4/runs/p10-s1 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 100 --seed 2 --backend inline --threads 1 --quiet --eval-every 5 --set p=10 --out reproductions/scgdm-fig4/runs/p10-s2 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 100 --seed 3 --backend inline --threads 1 --quiet --eval-every 5 --set p=10 --out reproductions/scgdm-fig4/runs/p10-s3 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 100 --seed 4 --backend inline --threads 1 --quiet --eval-every 5 --set p=10 --out reproductions/scgdm-fig4/runs/p10-s4 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 50 --seed 0 --backend inline --threads 1 --quiet --eval-every 2 --set p=20 --out reproductions/scgdm-fig4/runs/p20-s0 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 50 --seed 1 --backend inline --threads 1 --quiet --eval-every 2 --set p=20 --out reproductions/scgdm-fig4/runs/p20-s1 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 50 --seed 2 --backend inline --threads 1 --quiet --eval-every 2 --set p=20 --out reproductions/scgdm-fig4/runs/p20-s2 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 50 --seed 3 --backend inline --threads 1 --quiet --eval-every 2 --set p=20 --out reproductions/scgdm-fig4/runs/p20-s3 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 50 --seed 4 --backend inline --threads 1 --quiet --eval-every 2 --set p=20 --out reproductions/scgdm-fig4/runs/p20-s4 --overwrite
