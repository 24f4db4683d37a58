#!/usr/bin/env bash
# Set everything up, start the local stack, and run lint, type checks, unit and integration tests.
# A test that is skipped fails the run; so does a service that cannot start (with its reason).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
bash dev/setup.sh

echo "== ruff"; .venv/bin/ruff check .
echo "== mypy"; .venv/bin/mypy
if docker compose version >/dev/null 2>&1; then
    echo "== docker compose config"; docker compose -f docker-compose.yml config --quiet
fi

stack_was_up=0
.venv/bin/cdc-lake stack status >/dev/null 2>&1 && stack_was_up=1
if [[ $stack_was_up -eq 0 && "${CDC_LAKE_KEEP_STACK:-0}" != 1 ]]; then
    trap '.venv/bin/cdc-lake stack down || true' EXIT
fi
echo "== stack up"; .venv/bin/cdc-lake stack up

echo "== pytest"
CDC_LAKE_FORBID_SKIPS=1 CDC_LAKE_REQUIRE_RECORDED=1 CDC_LAKE_KEEP_STACK=1 \
    .venv/bin/pytest tests -p no:cacheprovider -q --durations=30 "$@"
echo "test.sh: finished in $(( $(date +%s) - started ))s"
