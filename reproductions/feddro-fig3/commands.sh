#!/bin/sh
# Every run of this claim, one per line (PYTHONPATH or an installed raycompo).
set -e
python -m raycompo.run --task fair-synth --algo feddro --rounds 300 --seed 0 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/feddro-fig3/runs/feddro-s0 --overwrite
python -m raycompo.run --task fair-synth --algo feddro --rounds 300 --seed 1 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/feddro-fig3/runs/feddro-s1 --overwrite
python -m raycompo.run --task fair-synth --algo feddro --rounds 300 --seed 2 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/feddro-fig3/runs/feddro-s2 --overwrite
python -m raycompo.run --task fair-synth --algo feddro --rounds 300 --seed 3 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/feddro-fig3/runs/feddro-s3 --overwrite
python -m raycompo.run --task fair-synth --algo feddro --rounds 300 --seed 4 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/feddro-fig3/runs/feddro-s4 --overwrite
python -m raycompo.run --task fair-synth --algo gcivr --rounds 300 --seed 0 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/feddro-fig3/runs/gcivr-s0 --overwrite
python -m raycompo.run --task fair-synth --algo gcivr --rounds 300 --seed 1 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/feddro-fig3/runs/gcivr-s1 --overwrite
python -m raycompo.run --task fair-synth --algo gcivr --rounds 300 --seed 2 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/feddro-fig3/runs/gcivr-s2 --overwrite
python -m raycompo.run --task fair-synth --algo gcivr --rounds 300 --seed 3 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/feddro-fig3/runs/gcivr-s3 --overwrite
python -m raycompo.run --task fair-synth --algo gcivr --rounds 300 --seed 4 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/feddro-fig3/runs/gcivr-s4 --overwrite
python -m raycompo.run --task fair-synth --algo unconstrained --rounds 300 --seed 0 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/feddro-fig3/runs/unconstrained-s0 --overwrite
python -m raycompo.run --task fair-synth --algo unconstrained --rounds 300 --seed 1 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/feddro-fig3/runs/unconstrained-s1 --overwrite
python -m raycompo.run --task fair-synth --algo unconstrained --rounds 300 --seed 2 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/feddro-fig3/runs/unconstrained-s2 --overwrite
python -m raycompo.run --task fair-synth --algo unconstrained --rounds 300 --seed 3 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/feddro-fig3/runs/unconstrained-s3 --overwrite
python -m raycompo.run --task fair-synth --algo unconstrained --rounds 300 --seed 4 --backend inline --threads 1 --quiet --eval-every 10 --out reproductions/feddro-fig3/runs/unconstrained-s4 --overwrite
