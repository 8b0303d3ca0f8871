#!/usr/bin/env bash
# One short accelerator check, for a session that is lent a GPU machine: the engine's tests that
# run on one device (a checkpoint kill -9 and resume among them), the engine benchmark (speed-up
# over a plain loop, and what the noise-scale statistics cost), float32 and bfloat16 throughput
# with MFU at batch 128 / 1,024 / 8,192, and the quickstart sweep, timed. Logs go to $OUT (7
# files, within what the device tool brings back).
#
# The GPU image has jax (CUDA), flax, optax, PyYAML, matplotlib, scikit-learn, tqdm and pytest
# but not mnist1d, so carry its wheel. Once, here, in the repo root:
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --implementation cp --platform manylinux2014_x86_64 -d .whl mnist1d==0.0.2.post1
# then run this with the device tool (carry [".whl"], timeout_s 600):
#   bash experiments/device_check.sh
# It ends within 8 minutes of device time. On this CPU machine, to try the script itself (smaller
# workloads and longer limits, about 10 minutes on 2 cores):
#   PLATFORM=cpu OUT=/tmp/device_check PYTHON=.venv/bin/python bash experiments/device_check.sh
set -u
OUT=${OUT:-/tmp/device_check}
PYTHON=${PYTHON:-python3}
export JAX_PLATFORMS=${PLATFORM:-cuda} XLA_FLAGS= PYTHONUNBUFFERED=1
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

if [ "${PLATFORM:-cuda}" = cpu ]; then  # trying the script itself: less work, more time
    SLOW=3 BENCH=(--steps 300 --runs 8) THROUGHPUT=(--steps 30 --batch-sizes 128 1024)
    QUICKSTART=(budget.max_examples=96000 "batch.sizes=[32,256,2048]")
else
    SLOW=1 BENCH=() THROUGHPUT=(--steps 300) QUICKSTART=()
fi

step() {  # step NAME SECONDS COMMAND...: run with a time limit (x SLOW), log to $OUT/NAME.log
    local name=$1 limit=$(($2 * SLOW))
    shift 2
    echo "=== $name (limit ${limit} s): $*"
    local start=$SECONDS
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
    echo "exit $? after $((SECONDS - start)) s"
    tail -n 12 "$OUT/$name.log"
}

step devices 60 "$PYTHON" -c "import jax; d = jax.devices()[0]; print(jax.__version__, \
jax.devices(), d.device_kind, (d.memory_stats() or {}).get('bytes_limit'))"
# Full float32 matmuls: the tests compare against exact arithmetic, TF32 would not pass.
step tests 240 env JAX_DEFAULT_MATMUL_PRECISION=highest "$PYTHON" -m pytest -q -rs \
    tests/test_gns.py tests/test_loop.py tests/test_program.py tests/test_gradients.py \
    tests/test_memory.py tests/test_precision.py tests/test_throughput.py tests/test_checkpoint.py \
    -k "not sigkill or sigkill and 1"
step bench128 100 "$PYTHON" experiments/bench_engine.py --also-gns-off --repeats 3 "${BENCH[@]}"
step throughput 150 "$PYTHON" experiments/throughput.py "${THROUGHPUT[@]}"
rm -rf /tmp/device_check_quickstart
step quickstart 120 "$PYTHON" -m scaling.cli sweep configs/quickstart.yaml "${QUICKSTART[@]}" \
    --out /tmp/device_check_quickstart --quiet
cp /tmp/device_check_quickstart/report.md "$OUT/quickstart_report.md" 2>/dev/null
cp /tmp/device_check_quickstart/figures/steps_vs_batch.png "$OUT/" 2>/dev/null
echo "=== summary"
grep -hE "^jax |workload|^engine|^plain|speed-up|gns costs" "$OUT"/bench*.log
grep -hE "^float32|^bfloat16|^peak" "$OUT"/throughput.log
