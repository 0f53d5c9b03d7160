#!/usr/bin/env bash
# The 16-core validation runs (issue 19), as one call on a lent many-core machine, which has Python and
# numpy but not this project's other packages. Measures only; the calibrations and predictions are made
# here by replay (docs/ctmc-reference.md, "On 16 cores"):
#
#   bash bench/fidelity/device16.sh prepare   # here: build/bin and build/device/py3XX (jsonschema, PyYAML)
#   run(command="bash bench/fidelity/device16.sh measure", carry=["build/bin", "build/device"], timeout_s=600)
#   .venv/bin/python -m bench ctmc_validation --replay <files_at>/m16.json.gz
#
# `measure` writes into $OUT (or ./build/device-out): m16.json.gz (every run, the host, ω from wake-cost)
# and facts.txt (the host as the run found it). TIME_LIMIT (default 420) is the bench's --time-limit: no
# run starts after that many seconds, so the call ends inside the run tool's 600 s. SPEC, PYTHON and
# EXTRA (more bench options, e.g. "--only uring-shared,hsha --probe") override the rest;
# tests/images/test_ctmc_validation_bench.py runs `measure` here with nothing importable but the standard
# library, numpy and the kit's packages.
set -euo pipefail
cd "$(dirname "$0")/../.."  # the repository root: `-m bench...` finds the package there

SPEC=${SPEC:-bench/fidelity/specs/multicore-16-short.yaml}
TIME_LIMIT=${TIME_LIMIT:-420}
PYTHON=${PYTHON:-python3}
KIT=${KIT:-build/device}  # the packages carried, one folder per Python version: $KIT/py3XX
PY_VERSIONS=(3.10 3.11 3.12 3.13)
# What the bench imports beyond the standard library and numpy (which a scientific host has: 16 MB a
# Python version would not fit the 64 MiB carried).
PACKAGES=(jsonschema pyyaml)

prepare() {
    make --no-print-directory build
    local v
    for v in "${PY_VERSIONS[@]}"; do
        rm -rf "$KIT/py${v/./}"
        .venv/bin/pip install --quiet --target "$KIT/py${v/./}" --only-binary=:all: \
            --implementation cp --python-version "$v" \
            --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 "${PACKAGES[@]}"
    done
    du -sh build/bin "$KIT"
}

measure() {
    local out=${OUT:-build/device-out} site
    mkdir -p "$out"
    site=$KIT/py$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
    if [[ ! -d $site ]]; then
        echo "device16: no $site for this host's $("$PYTHON" -V 2>&1) (prepared: ${PY_VERSIONS[*]})" >&2
        exit 2
    fi
    export PYTHONPATH="src:$site${PYTHONPATH:+:$PYTHONPATH}"
    # the bench's imports before the first run: the module's (its --help), and the spec loader's
    if ! { "$PYTHON" -c 'import numpy, yaml, jsonschema' && "$PYTHON" -m bench.fidelity.ctmc_validation --help >/dev/null; } \
        2>"$out/import-error.txt"; then
        echo "device16: the bench cannot import its packages here:" >&2
        cat "$out/import-error.txt" >&2
        exit 2
    fi
    {
        date -u
        nproc
        uptime
        uname -r
        "$PYTHON" -V
        lscpu 2>/dev/null | head -20 || true
    } >"$out/facts.txt" 2>&1
    cat "$out/facts.txt"
    # shellcheck disable=SC2086  # EXTRA is a list of options
    "$PYTHON" -m bench.fidelity.ctmc_validation --spec "$SPEC" --duration 2 --warmup 1 --repeats 2 --calib-repeats 2 \
        --keep-going --measure-only --time-limit "$TIME_LIMIT" --runs-out "$out/m16.json.gz" ${EXTRA:-}
}

case ${1:-} in
    prepare) prepare ;;
    measure) measure ;;
    *)
        echo "usage: bash bench/fidelity/device16.sh prepare|measure" >&2
        exit 2
        ;;
esac
