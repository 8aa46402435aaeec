"""Writes arrays of one chunk of 10^8 uint8 elements (issue 38): what a scan reserves for a
chunk read is what it holds, so `ndfusion -m 256M` reads each. zarr-python 3.4.2 writes them
and computes the values the test asserts (printed at the end).

- `missing.zarr`: the chunk is absent: every element reads as the fill value 7.
- `stored.zarr`: the chunk is stored (zstd): element i is i % 251.
- `missing_group.zarr`: a group (a dataset) whose variable `v` on dimension `x` is the
  absent chunk of `missing.zarr`.

Run from the repository root:

    PYENV_VERSION=3.12.1 python3.12 -m pip install zarr==3.4.2 numpy
    PYENV_VERSION=3.12.1 python3.12 tests/data/memory/make_big_chunks.py
"""

import shutil
from pathlib import Path

import numpy as np
import zarr

assert zarr.__version__ == "3.4.2", zarr.__version__

HERE = Path(__file__).resolve().parent
N = 100_000_000


def fresh(name):
    path = HERE / name
    if path.exists():
        shutil.rmtree(path)
    return path


missing = zarr.create_array(
    fresh("missing.zarr"), shape=(N,), chunks=(N,), dtype="uint8", fill_value=7
)
stored = zarr.create_array(
    fresh("stored.zarr"), shape=(N,), chunks=(N,), dtype="uint8", fill_value=0,
    compressors=zarr.codecs.ZstdCodec(level=3),
)
stored[:] = (np.arange(N, dtype=np.uint64) % 251).astype(np.uint8)
group = zarr.open_group(fresh("missing_group.zarr"), mode="w")
group.create_array(
    "v", shape=(N,), chunks=(N,), dtype="uint8", fill_value=7, dimension_names=["x"]
)

for name in ["missing.zarr", "stored.zarr", "missing_group.zarr/v"]:
    values = zarr.open_array(HERE / name)[:]
    print(f"{name}: count {values.size}, sum {int(values.sum(dtype=np.uint64))}, "
          f"min {values.min()}, max {values.max()}")
