#!/usr/bin/env bash
# Set everything up, start the local stack, and run lint, type checks, unit and integration tests.
# A test that is skipped fails the run; so does a service that cannot start (with its reason).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
bash dev/setup.sh

echo "== ruff"; .venv/bin/ruff check .
# mypy (a minute or more on a fresh clone: no cache) runs while the stack starts; its result is awaited
# before the tests, and a failure fails the run as before.
echo "== mypy (beside the stack's start)"
mkdir -p .cdc-lake; .venv/bin/mypy > .cdc-lake/mypy.log 2>&1 &
mypy_pid=$!
if docker compose version >/dev/null 2>&1; then
    echo "== docker compose config"; docker compose -f docker-compose.yml config --quiet
fi

stack_was_up=0
.venv/bin/cdc-lake stack status >/dev/null 2>&1 && stack_was_up=1
if [[ $stack_was_up -eq 0 && "${CDC_LAKE_KEEP_STACK:-0}" != 1 ]]; then
    trap '.venv/bin/cdc-lake stack down || true' EXIT
fi
# With Trino, the third reader of the stack tests' lake comparisons.
echo "== stack up"; .venv/bin/cdc-lake stack up --with trino
mypy_status=0
wait "$mypy_pid" || mypy_status=$?
cat .cdc-lake/mypy.log
if [[ $mypy_status -ne 0 ]]; then echo "mypy failed (exit $mypy_status)"; exit "$mypy_status"; fi

# Tests run in two processes, a test module per process at a time (each has its own SparkSession).
# Three gained nothing (2026-11-26 rehearsal: parallel phase 2,257 s with three against 2,274-2,287 s
# with two; each slow test took 40-60% longer, the load average stayed 6-7): the run is CPU-bound.
# Modules run longest first (tests/conftest.py, from tests/module_seconds.json; xdist's own reorder, most
# tests first, put the slow one-test modules last); this run's seconds per module go to
# .cdc-lake/test-module-seconds.json, to refresh that file from.
# The `serial` tests stop, pause, promote or reconfigure a service every test shares; they run alone after.
export CDC_LAKE_FORBID_SKIPS=1 CDC_LAKE_REQUIRE_RECORDED=1 CDC_LAKE_KEEP_STACK=1
status=0
echo "== pytest (parallel: everything but the serial tests)"
mkdir -p .cdc-lake
CDC_LAKE_MODULE_SECONDS=.cdc-lake/test-module-seconds.json .venv/bin/pytest tests -p no:cacheprovider -q \
    --durations=30 -n "${CDC_LAKE_TEST_PROCESSES:-2}" --dist loadfile --no-loadscope-reorder -m "not serial" \
    "$@" || status=$?
echo "== pytest (serial: tests that change a shared service)"
.venv/bin/pytest tests -p no:cacheprovider -q --durations=10 -m serial "$@" || status=$?
echo "test.sh: finished in $(( $(date +%s) - started ))s"
exit $status
