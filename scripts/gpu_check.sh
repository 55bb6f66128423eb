#!/usr/bin/env bash
# The GPU checks and figures of the engine issue, on a machine with an NVIDIA GPU whose
# python3 has a CUDA build of torch (CI has none: the same tests run there on the CPU).
#
#   scripts/gpu_check.sh kit       HERE, not there: fill .whl, .dev/anvil.xz and .data (below)
#   scripts/gpu_check.sh compute   the batched-compute tests on CUDA and the compute floor
#                                  (scripts/bench_compute.py); needs torch and the data only
#   scripts/gpu_check.sh network   the engine test on CUDA (a real network twice, bit for
#                                  bit) and scripts/bench_engine.py's CUDA rows
#   scripts/gpu_check.sh planned   the runs of .dev/plan.json, written here by
#                                  `scripts/run_experiments.py --declared STAGE --first N
#                                  --export .dev/plan.json` (a declared run needs the
#                                  records it is planned from, which the device is not
#                                  sent), made on the GPU in the background: a run longer
#                                  than one call goes on, and calling this stage again
#                                  waits for it (up to WAIT s, default: until DEADLINE)
#                                  and brings back its records ($OUT/planned-records.tgz),
#                                  its log and, meanwhile, its progress
#
# A bare machine gets what it lacks from ignored folders of the checkout, when present:
# .whl/ (py3.12 wheels of web3, vyper, coincurve and their needs, at the versions of
# .venv, without what the machine has), .dev/anvil.xz (the Anvil binary) and
# .data/fashion-mnist/ (the IDX files), and keeps them in $STASH (/tmp/mcfl-device),
# which outlives a call on a machine still warm (the checkout's ignored folders do not).
# The device tool sends the tracked files and what is carried, at most 64 MiB, and
# results/ alone holds about 140 MB of records: for the call, untrack it in the index
# only (`git rm -r -q --cached results && echo /results/ >> .git/info/exclude`), then
# restore it (`git reset -q`, and drop that line). The rest of the tree is about 7 MB,
# so .data (29 MB), .whl (13 MB) and .dev (12 MB) go in one call. Logs and records go
# to $OUT (default /tmp/gpu-check); each step has its own time limit, and a step that
# would not end before DEADLINE seconds (from the start) is left out and says so.
set -u
stage=${1:?usage: scripts/gpu_check.sh kit|compute|network|paper|planned}
if [ "$stage" = kit ]; then
  # What the device lacks, from this checkout's .venv and node_modules and Debian's data.
  set -e
  pip=(.venv/bin/python -m pip download -q --only-binary=:all: --python-version 3.12
    --implementation cp -d .whl --platform manylinux_2_28_x86_64 --platform
    manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64
    --platform manylinux1_x86_64)
  freeze=$(.venv/bin/python -m pip freeze)
  mkdir -p .whl .dev .data
  "${pip[@]}" $(grep -iE '^(web3|vyper|coincurve|multiformats)==' <<<"$freeze")
  # Their needs at .venv's versions, where the resolver took newer ones.
  for wheel in .whl/*.whl; do
    name=${wheel#.whl/}; name=${name%%-[0-9]*}
    pin=$(grep -iE "^${name//_/[-_]}==" <<<"$freeze" || true)
    if [ -n "$pin" ] && [ "${wheel#.whl/${name}-${pin#*==}-}" = "$wheel" ]; then
      rm "$wheel" && "${pip[@]}" --no-deps "$pin"
    fi
  done
  # The machine's own (docs of the device tool): two versions of one stop the install.
  for p in aiohappyeyeballs aiohttp aiosignal attrs certifi charset_normalizer frozenlist \
    idna multidict packaging propcache regex requests toolz typing_extensions urllib3 \
    wheel yarl types_requests six; do rm -f .whl/"$p"-[0-9]*.whl; done
  xz -T2 -9 -c "$(readlink -f node_modules/.bin/anvil)" >.dev/anvil.xz
  cp -r /usr/share/datasets/fashion-mnist .data/
  du -sh .whl .dev .data
  exit 0
fi
OUT=${OUT:-/tmp/gpu-check}
DEVICE=${DEVICE:-cuda}
DEADLINE=${DEADLINE:-540}
PY=${PYTHON:-python3}
STASH=${STASH:-/tmp/mcfl-device}
mkdir -p "$OUT" "$STASH"
log="$OUT/gpu-check-$stage.log"
began=$(date +%s)
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore MCFL_TEST_DEVICE=$DEVICE

if [ "${WHEELS:-1}" = 1 ] && compgen -G ".whl/*.whl" >/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$STASH/site" .whl/*.whl >>"$log" 2>&1 || { echo "wheels did not install" | tee -a "$log"; exit 1; }
fi
[ -f .dev/anvil.xz ] && xz -dc .dev/anvil.xz >"$STASH/anvil" && chmod +x "$STASH/anvil"
[ -d .data/fashion-mnist ] && mkdir -p "$STASH/data" && cp -r .data/fashion-mnist "$STASH/data/"
export PYTHONPATH=$PWD
[ -d "$STASH/site" ] && export PYTHONPATH=$PWD:$STASH/site
[ -x "$STASH/anvil" ] && export MCFL_ANVIL=$STASH/anvil
if [ -d "$STASH/data/fashion-mnist" ]; then
  export MCFL_DATA_DIR=$STASH/data
elif [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "no Fashion-MNIST here (.data/fashion-mnist or Debian's package): runs will fail" | tee -a "$log"
fi

# step NAME LIMIT_S COMMAND...: run it under its limit unless the deadline comes first.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((DEADLINE - ($(date +%s) - began)))
  if [ "$left" -lt "$limit" ]; then
    echo "== $name: not run ($left s left before the deadline, it may take $limit s)" | tee -a "$log"
    return
  fi
  echo "== $name ($(date -u +%T), limit $limit s)" | tee -a "$log"
  timeout "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  echo "== $name: rc=$rc after $(($(date +%s) - began)) s" | tee -a "$log"
}

step machine 60 bash -c "nvidia-smi -L; nproc; free -g | head -2; $PY -c 'import torch; print(torch.__version__, torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)'"
case $stage in
  compute)
    step tests-cuda 90 $PY -m pytest -p no:ape_test -p no:cacheprovider -q \
      tests/compute tests/host/test_compute.py
    step bench-compute 240 $PY scripts/bench_compute.py --sizes "${SIZES:-38,200,1000}" \
      --device "$DEVICE" --records "$OUT/bench-compute.jsonl"
    step bench-compute-loop 90 $PY scripts/bench_compute.py --sizes 38 --kernel loop \
      --device "$DEVICE" --records "$OUT/bench-compute.jsonl"
    ;;
  network)
    step tests-network-cuda 200 $PY -m pytest -p no:ape_test -p no:cacheprovider -q \
      tests/network/test_engines.py -k repeats
    bench=($PY scripts/bench_engine.py --records "$OUT/bench-engine.jsonl"
      --out /tmp/bench-engine --device "$DEVICE" --again)
    step mcfl-38 120 "${bench[@]}" --sizes 38 --engines batched --rounds 5
    step mcfl-1000 300 "${bench[@]}" --sizes 1000 --engines batched --rounds 5
    step fedavg-1000 200 "${bench[@]}" --sizes 1000 --engines batched --rounds 5 \
      --strategy fedavg
    step mcfl-38-process 200 "${bench[@]}" --sizes 38 --engines process --rounds 5
    ;;
  paper)
    # The paper's full size end to end (38 trainers x 102 rounds, groups), timed.
    step paper-size 580 bash -c "time $PY -m mcfl_chain simulate --published-size \
      --scenario groups --engine batched --device $DEVICE --out /tmp/paper-size && \
      cp /tmp/paper-size/rounds.csv $OUT/paper-size-rounds.csv"
    ;;
  planned)
    # One copy of the checkout in $STASH/src, so that the next call's fresh copy of the
    # tree never changes the files under a run that is still going.
    job="$STASH/planned"
    mkdir -p "$job"
    if [ ! -f "$job/pid" ]; then
      [ -f .dev/plan.json ] || { echo "no .dev/plan.json: export one first" | tee -a "$log"; exit 2; }
      rm -rf "$STASH/src" && mkdir -p "$STASH/src" &&
        cp -a mcfl_chain scripts scenarios contracts docs pyproject.toml .dev "$STASH/src/"
      echo "== planned: started $(date -u +%T)" | tee -a "$log"
      (cd "$STASH/src" && PYTHONPATH=$STASH/src${PYTHONPATH#$PWD} setsid nohup $PY \
        scripts/run_experiments.py --declared "${STAGE:-paper-scale}" --from .dev/plan.json \
        --device "$DEVICE" --out "$job/runs" --records "$job/records" >"$job/log" 2>&1 &
        echo $! >"$job/pid")
      date +%s >"$job/began"
    fi
    wait_until=$((began + ${WAIT:-$((DEADLINE - 15))}))
    while kill -0 "$(cat "$job/pid")" 2>/dev/null && [ "$(date +%s)" -lt "$wait_until" ]; do
      sleep 5
    done
    if kill -0 "$(cat "$job/pid")" 2>/dev/null; then
      echo "== planned: still running after $(($(date +%s) - $(cat "$job/began"))) s" | tee -a "$log"
    else
      echo "== planned: ended after about $(($(date +%s) - $(cat "$job/began"))) s" | tee -a "$log"
    fi
    cp "$job/log" "$OUT/planned.log"
    [ -d "$job/records" ] && tar czf "$OUT/planned-records.tgz" -C "$job" records
    # Progress of the run under way: its metrics so far, no weights.
    [ -d "$job/runs" ] && tar czf "$OUT/planned-progress.tgz" --exclude=blobs \
      --exclude=trainers -C "$job" runs
    ;;
  *) echo "unknown stage $stage: compute, network, paper or planned" >&2; exit 2 ;;
esac
echo "== done after $(($(date +%s) - began)) s" | tee -a "$log"
