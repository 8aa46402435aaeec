"""Zarr v2 fixtures written by zarr-python 2.18.7 (NumPy dtypes in .zarray).

    python3.11 -m venv /tmp/zp218 && /tmp/zp218/bin/pip install zarr==2.18.7 'numpy<2.3'
    /tmp/zp218/bin/python tests/data/zarr_v2/make_fixtures.py

The same arrays as tests/data/zarr_v3 (see ../fixture_common.py), plus what only v2 has:
per-field byte order, subarray fields, Fortran order, '/' chunk keys, numcodecs compressors
and filters, xarray's _ARRAY_DIMENSIONS. expected.json holds what numpy reads back.
"""

import sys
from pathlib import Path

import numcodecs
import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from fixture_common import GRID, GRID_CHUNKS, GRID_SHAPE, POINT, POINT_FILL, Recorder, grid_data, point_data  # noqa: E402

assert zarr.__version__ == "2.18.7", zarr.__version__
rec = Recorder(__file__)


def create(name, shape, chunks, dtype, dims=None, **kwargs):
    store = rec.fresh(f"{name}.zarr")
    z = zarr.open_array(store, mode="w", shape=shape, chunks=chunks, dtype=dtype, **kwargs)
    if dims is not None:
        z.attrs["_ARRAY_DIMENSIONS"] = dims  # as xarray writes it
    return store, z


# The shared 1-D array: nested struct, fill value, a missing last chunk.
store, z = create("struct_1d", (10,), (4,), POINT, fill_value=POINT_FILL)
z[0:8] = point_data(8)
rec.record("struct_1d", store, ["dim_0"])

# The shared 2-D grid (default compressor: blosc lz4), named dimensions.
store, z = create("grid_2d", GRID_SHAPE, GRID_CHUNKS, GRID, dims=["time", "station"], fill_value=None)
z[...] = grid_data()
rec.record("grid_2d", store, ["time", "station"])

# Fortran order and '/' chunk keys.
store, z = create("grid_2d_fortran", GRID_SHAPE, GRID_CHUNKS, GRID, dims=["time", "station"],
                  order="F", dimension_separator="/", fill_value=0)
z[...] = grid_data()
rec.record("grid_2d_fortran", store, ["time", "station"])

# Big-endian fields next to little-endian ones.
MIXED = np.dtype([("temp", ">f4"), ("pressure", ">f8"), ("ok", "?"), ("code", ">i2"), ("n", "<u4")])
store, z = create("grid_2d_big_endian", GRID_SHAPE, GRID_CHUNKS, MIXED, dims=["time", "station"],
                  compressor=numcodecs.Zstd(level=3))
x = grid_data(dtype=MIXED)
x["code"] = -np.arange(35).reshape(GRID_SHAPE)
x["n"] = np.arange(35).reshape(GRID_SHAPE) * 1000003
z[...] = x
rec.record("grid_2d_big_endian", store, ["time", "station"])

# Subarray fields: 1-D and 2-D.
SUB = np.dtype([("id", "<i4"), ("c", "<f4", (3,)), ("m", ">i2", (2, 2))])
store, z = create("subarray", (7,), (3,), SUB, compressor=numcodecs.GZip(level=1))
x = np.zeros(7, dtype=SUB)
x["id"] = np.arange(7)
x["c"] = np.arange(21, dtype=np.float32).reshape(7, 3) / 4
x["m"] = np.arange(28).reshape(7, 2, 2) - 10
z[...] = x
rec.record("subarray", store, ["dim_0"])

# Compressors and filters numcodecs offers.
for name, kwargs in {
    "codec_zlib": dict(compressor=numcodecs.Zlib(level=6)),
    "codec_bz2": dict(compressor=numcodecs.BZ2(level=9)),
    "codec_blosc_zstd": dict(compressor=numcodecs.Blosc(cname="zstd", clevel=5, shuffle=numcodecs.Blosc.BITSHUFFLE)),
    "codec_shuffle_filter": dict(filters=[numcodecs.Shuffle(elementsize=GRID.itemsize)], compressor=numcodecs.Zstd()),
    "codec_none": dict(compressor=None),
    "codec_fletcher32_filter": dict(filters=[numcodecs.Fletcher32()], compressor=numcodecs.GZip(level=1)),
    "codec_adler32": dict(compressor=None, filters=[numcodecs.Adler32()]),
}.items():
    store, z = create(name, GRID_SHAPE, GRID_CHUNKS, GRID, dims=["time", "station"], **kwargs)
    z[...] = grid_data()
    rec.record(name, store, ["time", "station"])

# Plain dtypes: one `value` column.
store, z = create("plain_f8", (3, 4), (2, 2), "<f8", dims=["y", "x"], fill_value=np.nan)
z[0:2, :] = np.arange(8, dtype="<f8").reshape(2, 4) / 4
rec.record("plain_f8", store, ["y", "x"])

store, z = create("plain_datetime", (4,), (3,), "<M8[ns]", fill_value=None)
z[...] = np.array(["2024-01-01T00:00:00.5", "NaT", "1970-01-01", "2262-04-11"], dtype="M8[ns]")
rec.record("plain_datetime", store, ["dim_0"])

store, z = create("plain_unicode", (3,), (2,), "<U3", fill_value="")
z[...] = np.array(["a", "héé", ""], dtype="<U3")
rec.record("plain_unicode", store, ["dim_0"])

store, z = create("plain_be_i8", (2, 3), (1, 3), ">i8", dims=["a", "b"], fill_value=-7)
z[0, :] = [1, -2, 2**62]
rec.record("plain_be_i8", store, ["a", "b"])

rec.write()

# Bad input only v2 can have: an object dtype, and a compressor zarrs cannot decode.
BAD = rec.here / "bad"
BAD.mkdir(exist_ok=True)
store = str(BAD / "object_dtype.zarr")
zarr.open_array(store, mode="w", shape=(2,), chunks=(2,), dtype=object, object_codec=numcodecs.VLenUTF8())
store = str(BAD / "lzma_compressor.zarr")
z = zarr.open_array(store, mode="w", shape=(4,), chunks=(2,), dtype=POINT, compressor=numcodecs.LZMA())
z[...] = point_data(4)
