"""Writes the raw deflate chunks of `t2m` in the grid benchmark's netCDF-4 file (made by
benches/grid_analysis.py) to chunks.bin: per chunk, its length (u32, little-endian) and its
bytes, as h5py reads them without filters. Also times CPython's zlib (C zlib) on them.

    PYENV_VERSION=3.12.1 python3.12 benches/inflaters/extract_chunks.py \
        target/bench-data/era5_like_100M_nc4.nc target/bench-data/chunks.bin
"""

import struct
import sys
import time
import zlib

import h5py

source, target = sys.argv[1], sys.argv[2]
variable = h5py.File(source)["t2m"]
chunks = []
for i in range(variable.id.get_num_chunks()):
    mask, data = variable.id.read_direct_chunk(variable.id.get_chunk_info(i).chunk_offset)
    assert mask == 0, "every filter applied"
    chunks.append(data)
with open(target, "wb") as out:
    for data in chunks:
        out.write(struct.pack("<I", len(data)))
        out.write(data)
best = min(
    (lambda start: (sum(len(zlib.decompress(c)) for c in chunks), time.perf_counter() - start)[1])(
        time.perf_counter())
    for _ in range(5))
print(f"{len(chunks)} chunks, {sum(map(len, chunks))} bytes; CPython zlib: {best:.3f} s")
