#!/usr/bin/env bash
# One short accelerator check, for a session that is lent a GPU machine: the engine's tests that
# run on one device (a checkpoint kill -9 and resume among them), the engine benchmark (speed-up
# over a plain loop, and what the noise-scale statistics cost), float32 and bfloat16 throughput
# with MFU at batch 128 / 1,024 / 8,192, the quickstart sweep, timed, and the 124M GPT preset's
# memory check (experiments/memory_check.py: one chunk at batch 8, 64 and 512 sequences of
# 1,024 tokens, with and without remat, and fsdp where there is more than one device: step
# time, MFU and peak memory against the memory plan's estimate). Logs go to $OUT (9 files,
# within what the device tool brings back). CHECKS=gpt124m runs the 124M check alone (at most
# 5.5 minutes; its rows for batch 8 and 512 ran on an H200: docs/memory.md), CHECKS=engine all
# but it.
#
# The GPU image has jax (CUDA), flax, optax, PyYAML, matplotlib, scikit-learn, tqdm and pytest
# but not mnist1d, so carry its wheel. Once, here, in the repo root:
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --implementation cp --platform manylinux2014_x86_64 -d .whl mnist1d==0.0.2.post1
# then run this with the device tool (carry [".whl"], timeout_s 600):
#   bash experiments/device_check.sh
# The engine's checks end within 8 minutes of device time, the 124M check within 5.5 more: a
# device tool call runs at most 10 minutes, so run them as two calls (CHECKS=engine, then
# CHECKS=gpt124m). On this CPU machine, to try the script itself (smaller
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
    GPT124M=(--preset 14m --context 128 --vocab 256 --batch-sizes 8 32 --micro 8)
else
    SLOW=1 BENCH=() THROUGHPUT=(--steps 300) QUICKSTART=() GPT124M=()
fi
CHECKS=${CHECKS:-all}  # all; engine: all but the 124M check; gpt124m: it alone

step() {  # step NAME SECONDS COMMAND...: run with a time limit (x SLOW), log to $OUT/NAME.log
    local name=$1 limit=$(($2 * SLOW))
    shift 2
    echo "=== $name (limit ${limit} s): $*"
    local start=$SECONDS
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
    echo "exit $? after $((SECONDS - start)) s"
    tail -n 12 "$OUT/$name.log"
}

if [ "$CHECKS" != gpt124m ]; then
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
# Not quiet: on an H100 it did not end within 120 s (2026-12-05, quiet, so nothing said how
# far it got); the log's group lines say where the time goes if it is cut off again.
step quickstart 120 "$PYTHON" -m scaling.cli sweep configs/quickstart.yaml "${QUICKSTART[@]}" \
    --out /tmp/device_check_quickstart --progress lines
cp /tmp/device_check_quickstart/report.md "$OUT/quickstart_report.md" 2>/dev/null
cp /tmp/device_check_quickstart/figures/steps_vs_batch.png "$OUT/" 2>/dev/null
fi
if [ "$CHECKS" != engine ]; then
# The 124M preset: each setting in a process of its own (its peak memory its own), at most
# 150 s each; the rows also go to $OUT/gpt124m.json.
step gpt124m 330 "$PYTHON" experiments/memory_check.py --limit-s 150 "${GPT124M[@]}" \
    --json "$OUT/gpt124m.json"
fi
echo "=== summary"
if [ "$CHECKS" != gpt124m ]; then
    grep -hE "^jax |workload|^engine|^plain|speed-up|gns costs" "$OUT"/bench*.log
    grep -hE "^float32|^bfloat16|^peak" "$OUT"/throughput.log
fi
[ "$CHECKS" = engine ] || sed -n '/batch accum/,$p' "$OUT"/gpt124m.log
