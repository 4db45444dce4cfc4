#!/usr/bin/env bash
# Try the multi-node path on one machine: start a fake 2-node Ray cluster (Ray's
# `fake_multinode` provider, cluster/fake-multinode.yaml: a 1-CPU head and the autoscaler
# adding a 1-CPU worker node), run raycompo on it with `--address auto`, show where the hosts
# ran, and stop ONLY the processes this script started (those with its private RAY_TMPDIR);
# it never runs `ray stop`, which would stop every Ray on the machine.
#
#   PYTHON=.venv/bin/python PORT=6391 bash cluster/try_fake_cluster.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
RAY="$(dirname "$PY")/ray"
PORT=${PORT:-6391}
TMP=$(mktemp -d /tmp/rcfake-XXXX)
export RAY_TMPDIR=$TMP RAY_FAKE_CLUSTER=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}

stop_mine() {  # every process whose environment has our RAY_TMPDIR, by pid
  for p in /proc/[0-9]*; do
    if { tr '\0' '\n' < "$p/environ"; } 2>/dev/null | grep -qx "RAY_TMPDIR=$TMP"; then
      pid=${p#/proc/}; [ "$pid" != "$$" ] && kill "$pid" 2>/dev/null || true
    fi
  done
  sleep 2
  for p in /proc/[0-9]*; do
    if { tr '\0' '\n' < "$p/environ"; } 2>/dev/null | grep -qx "RAY_TMPDIR=$TMP"; then
      pid=${p#/proc/}; [ "$pid" != "$$" ] && kill -9 "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$TMP"
}
trap stop_mine EXIT

IP=$("$PY" -c 'import ray._private.services as s; print(s.get_node_ip_address())')
sed "s|  # gcs_address:.*|  gcs_address: \"$IP:$PORT\"|" cluster/fake-multinode.yaml > "$TMP/cluster.yaml"
echo "== starting the head on $IP:$PORT (temp dir $TMP)"
"$RAY" start --head --port "$PORT" --num-cpus 1 --include-dashboard false \
  --autoscaling-config "$TMP/cluster.yaml" --temp-dir "$TMP" --disable-usage-stats

echo "== waiting for the autoscaler to add the worker node"
"$PY" - "$IP:$PORT" <<'PYEOF'
import sys, time, ray
ray.init(address=sys.argv[1], log_to_driver=False)
t0 = time.time()
while time.time() - t0 < 90:
    alive = [n for n in ray.nodes() if n["Alive"]]
    if len(alive) >= 2:
        break
    time.sleep(1)
print(f"nodes alive: {len(alive)} after {time.time() - t0:.0f} s:", [(n['NodeID'][:8], n['Resources'].get('CPU')) for n in alive])
sys.exit(0 if len(alive) >= 2 else 1)
PYEOF
"$RAY" status --address "$IP:$PORT" | sed -n 1,20p

echo "== python -m raycompo.run ... --address auto"
"$PY" -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 3 \
  --set n_clients=4 big_client_size=60 small_client_size=20 val_per_client=40 \
  --clients-per-actor 2 --cpus-per-actor 0.5 --threads 1 --address auto --out "$TMP/run"
"$PY" -c "import json,sys; c=json.load(open(sys.argv[1])); print('status', c['status'], 'final val_acc', c['final'].get('val_acc'))" "$TMP/run/config.json"

echo "== the same federation from Python, showing the node of each host actor"
"$PY" tests/multinode_run.py --address auto --rounds 2 --clients-per-actor 2 --cpus-per-actor 0.5 | grep -v '^RESULT'
