"""Writes the Icechunk copy of the benchmark dataset (BENCHMARKS.md, "Icechunk against plain
Zarr"): `target/bench-data/dataset_100M.zarr` (benches/compare.rs writes it) copied by xarray
2026.9.0 into an icechunk 2.3.0 repository, one commit, the same chunks and codecs.

    PYENV_VERSION=3.12.1 python3.12 -m venv target/icechunk-bench
    target/icechunk-bench/bin/pip install icechunk==2.3.0 xarray==2026.9.0 zarr==3.4.2
    target/icechunk-bench/bin/python benches/icechunk_copy.py
"""

import os
import shutil
from pathlib import Path

import icechunk
import xarray as xr

ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = Path(os.environ.get("NDFUSION_BENCH_DIR", ROOT / "target" / "bench-data"))
source = BENCH_DIR / "dataset_100M.zarr"
target = BENCH_DIR / "dataset_100M.icechunk"
if target.exists():
    shutil.rmtree(target)
ds = xr.open_zarr(source)
repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(target)))
session = repo.writable_session("main")
ds.to_zarr(session.store, zarr_format=3, consolidated=False)
print(session.commit("the benchmark dataset"), target)
