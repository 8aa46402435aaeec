"""What inflating a netCDF-4 variable's chunks costs at all (BENCHMARKS.md, "what bounds the
netCDF-4 speed goals"): each chunk's stored bytes read by h5py (`read_direct_chunk`), then
inflated by Python's zlib (C zlib) and unshuffled by NumPy, one thread, best of 3.

    PYENV_VERSION=3.12.1 python3.12 benches/inflate_bound.py FILE.nc VARIABLE

The file of that section: benches/compare.rs's `netcdf4_location` script, or the same data
written straight to NETCDF4 (deflate 1 + shuffle, chunks of 5 x 100 x 1000).
"""

import sys
import time
import zlib

import h5py
import numpy as np


def main(path, variable):
    with h5py.File(path) as f:
        dsid = f[variable].id
        n = dsid.get_num_chunks()
        chunks = [dsid.read_direct_chunk(dsid.get_chunk_info(i).chunk_offset)[1]
                  for i in range(n)]
    best = None
    for _ in range(3):
        start = time.perf_counter()
        out = [zlib.decompress(c) for c in chunks]
        inflate = time.perf_counter() - start
        start = time.perf_counter()
        for o in out:
            np.frombuffer(o, "u1").reshape(2, -1).T.copy()
        unshuffle = time.perf_counter() - start
        best = min(best or (float("inf"), 0.0), (inflate, unshuffle))
    stored, inflated = sum(map(len, chunks)), sum(map(len, out))
    print(f"{n} chunks, {stored} B stored, {inflated} B inflated: "
          f"inflate {best[0]:.3f} s, unshuffle {best[1]:.3f} s (one thread)")


if __name__ == "__main__":
    main(*sys.argv[1:3])
