#!/usr/bin/env bash
# The Python package's tests: a virtual environment (Python 3.12 from pyenv) with datafusion
# 54.x, pytest, the references (xarray 2026.9 with zarr-python 3.4.2, pylance 14.0.2) and
# polars and DuckDB (readers of the session's Arrow stream) from PyPI, the extension built in
# the debug profile into this repository's target directory (`maturin develop`), then pytest
# over python/tests. The S3 tests start SeaweedFS from
# scripts/install-test-servers.sh on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/python-venv
if [ ! -x "$venv/bin/python" ]; then
    PYENV_VERSION=3.12.1 python3.12 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check \
    "datafusion>=54,<55" "maturin>=1.16,<2" "pyarrow>=14" "pytest>=8" "numpy" \
    "xarray==2026.9.0" "zarr==3.4.2" "pylance==14.0.2" "adbc-driver-flightsql==1.13.0" \
    "polars==1.44.2" "duckdb==2.0.1"
(
    cd python
    VIRTUAL_ENV="$PWD/../$venv" PATH="$PWD/../$venv/bin:$PATH" CARGO_TARGET_DIR="$PWD/../target" \
        "../$venv/bin/maturin" develop --quiet
)
"$venv/bin/python" -m pytest -q python/tests
