#!/bin/sh
# Every run of this claim, one per line (PYTHONPATH or an installed raycompo).
set -e
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 0 --backend inline --threads 1 --quiet --eval-every 10 --set gamma=0.3 --out reproductions/scgdm-fig3/runs/gamma0.3-s0 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 1 --backend inline --threads 1 --quiet --eval-every 10 --set gamma=0.3 --out reproductions/scgdm-fig3/runs/gamma0.3-s1 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 2 --backend inline --threads 1 --quiet --eval-every 10 --set gamma=0.3 --out reproductions/scgdm-fig3/runs/gamma0.3-s2 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 3 --backend inline --threads 1 --quiet --eval-every 10 --set gamma=0.3 --out reproductions/scgdm-fig3/runs/gamma0.3-s3 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 4 --backend inline --threads 1 --quiet --eval-every 10 --set gamma=0.3 --out reproductions/scgdm-fig3/runs/gamma0.3-s4 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 0 --backend inline --threads 1 --quiet --eval-every 10 --set gamma=0.5 --out reproductions/scgdm-fig3/runs/gamma0.5-s0 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 1 --backend inline --threads 1 --quiet --eval-every 10 --set gamma=0.5 --out reproductions/scgdm-fig3/runs/gamma0.5-s1 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 2 --backend inline --threads 1 --quiet --eval-every 10 --set gamma=0.5 --out reproductions/scgdm-fig3/runs/gamma0.5-s2 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 3 --backend inline --threads 1 --quiet --eval-every 10 --set gamma=0.5 --out reproductions/scgdm-fig3/runs/gamma0.5-s3 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 4 --backend inline --threads 1 --quiet --eval-every 10 --set gamma=0.5 --out reproductions/scgdm-fig3/runs/gamma0.5-s4 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 0 --backend inline --threads 1 --quiet --eval-every 10 --set gamma=0.7 --out reproductions/scgdm-fig3/runs/gamma0.7-s0 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 1 --backend inline --threads 1 --quiet --eval-every 10 --set gamma=0.7 --out reproductions/scgdm-fig3/runs/gamma0.7-s1 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 2 --backend inline --threads 1 --quiet --eval-every 10 --set gamma=0.7 --out reproductions/scgdm-fig3/runs/gamma0.7-s2 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 3 --backend inline --threads 1 --quiet --eval-every 10 --set gamma=0.7 --out reproductions/scgdm-fig3/runs/gamma0.7-s3 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 4 --backend inline --threads 1 --quiet --eval-every 10 --set gamma=0.7 --out reproductions/scgdm-fig3/runs/gamma0.7-s4 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 0 --backend inline --threads 1 --quiet --eval-every 10 --set gamma=0.9 --out reproductions/scgdm-fig3/runs/gamma0.9-s0 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 1 --backend inline --threads 1 --quiet --eval-every 10 --set gamma=0.9 --out reproductions/scgdm-fig3/runs/gamma0.9-s1 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 2 --backend inline --threads 1 --quiet --eval-every 10 --set gamma=0.9 --out reproductions/scgdm-fig3/runs/gamma0.9-s2 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 3 --backend inline --threads 1 --quiet --eval-every 10 --set gamma=0.9 --out reproductions/scgdm-fig3/runs/gamma0.9-s3 --overwrite
python -m raycompo.run --task maml-sinusoid --algo local-scgdm --rounds 200 --seed 4 --backend inline --threads 1 --quiet --eval-every 10 --set gamma=0.9 --out reproductions/scgdm-fig3/runs/gamma0.9-s4 --overwrite
