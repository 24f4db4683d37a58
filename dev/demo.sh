#!/usr/bin/env bash
# Set everything up and run the demo on local defaults: a source database with changes flowing
# through Debezium and Kafka into a Hudi table you can query, with its freshness.
set -euo pipefail
cd "$(dirname "$0")/.."
bash dev/setup.sh
exec .venv/bin/cdc-lake demo "$@"
