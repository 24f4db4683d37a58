#!/usr/bin/env bash
# Set up a development machine (Debian 12): system tools, the virtualenv, the package.
# Idempotent; the local stack's servers and jars are installed on first `cdc-lake stack up`.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v java >/dev/null || need_apt+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || need_apt+=(maven)
python3 -c 'import ensurepip, venv' 2>/dev/null || need_apt+=(python3-venv)
if ((${#need_apt[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "setup: missing ${need_apt[*]}; run: sudo apt-get install -y ${need_apt[*]}" >&2
        exit 1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need_apt[@]}"
fi
if ! command -v go >/dev/null && [[ ! -x /usr/local/go/bin/go ]]; then
    echo "setup: Go (>= 1.24) is needed to build the local object store; install it from go.dev or your distribution" >&2
    exit 1
fi

# The local object store is built with Go (a minute or more of both cores, cdc_lake/stack/objectstore.py):
# on a machine without it yet, the build starts now, beside the Python install below; `stack up` finds
# the binary, or waits for this build through Go's own build cache.
gw_setting() { sed -n "s/^VERSITYGW_$1 = \"\(.*\)\"$/\1/p" cdc_lake/stack/objectstore.py; }
gw_dir="${CDC_LAKE_CACHE:-$HOME/.cache/cdc-lake}/bin/versitygw-$(gw_setting VERSION)"
if [[ ! -x $gw_dir/versitygw ]]; then
    go_bin=$(command -v go || echo /usr/local/go/bin/go)
    mkdir -p .cdc-lake
    # Built aside and renamed into place: `stack up` never sees a binary half written.
    (GOBIN=$gw_dir.setup CGO_ENABLED=0 "$go_bin" install "$(gw_setting MODULE)@$(gw_setting VERSION)" \
        > .cdc-lake/versitygw-build.log 2>&1 && mkdir -p "$gw_dir" \
        && mv -f "$gw_dir.setup/versitygw" "$gw_dir/versitygw" &)
fi

python_version=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "setup: Python >= 3.11 is required, found $python_version" >&2
    exit 1
fi
[[ -x .venv/bin/python ]] || python3 -m venv .venv
# Reinstall only when pyproject.toml or the tested set (dev/constraints.txt) changed since the last
# successful install.
stamp=.venv/.cdc-lake-installed
wanted=$(cat pyproject.toml dev/constraints.txt | sha256sum | cut -d' ' -f1)
if [[ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]]; then
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q -e ".[dev]" -c dev/constraints.txt
    echo "$wanted" > "$stamp"
fi
# promtool checks the generated alert rules in the tests; taken once from Debian's prometheus package
# into the cache (needs the network).
.venv/bin/python -m cdc_lake.stack.promtool >/dev/null
echo "setup: ready (.venv with cdc-lake $(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("cdc-lake"))'))"
