"""Writes the Zarr v3 fixtures of ndfusion's tests with zarr-python 3.4.2 (the `struct` data type).

Run from the repository root:

    PYENV_VERSION=3.12.1 python3.12 -m pip install zarr==3.4.2 numpy
    PYENV_VERSION=3.12.1 python3.12 tests/data/zarr_v3/make_fixtures.py

Besides the arrays it writes `expected.json`: for every fixture, every leaf column in C order
as numpy reads the array back (struct fields flattened to dotted paths, complex numbers to
`.re` / `.im`). Floats are written as Python `repr` strings so they compare bit for bit;
datetimes as integers in the Arrow unit the reader uses (or null for NaT); bytes as hex.
It also writes broken copies under `bad/` for the error tests.
"""

import json
import shutil
import sys
import warnings
from pathlib import Path

import numpy as np
import zarr
from zarr.codecs import (
    BloscCodec,
    BytesCodec,
    Crc32cCodec,
    GzipCodec,
    TransposeCodec,
    ZstdCodec,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from fixture_common import GRID, GRID_CHUNKS, GRID_SHAPE, POINT, POINT_FILL, Recorder, grid_data, leaf_values, point_data  # noqa: E402

assert zarr.__version__ == "3.4.2", zarr.__version__
warnings.filterwarnings("ignore")  # raw/bytes data types "have no v3 spec" warnings

HERE = Path(__file__).resolve().parent
rec = Recorder(__file__)
fresh, record = rec.fresh, rec.record

ALL = np.dtype([
    ("b", "?"), ("i1", "i1"), ("i2", "<i2"), ("i4", "<i4"), ("i8", "<i8"),
    ("u1", "u1"), ("u2", "<u2"), ("u4", "<u4"), ("u8", "<u8"),
    ("f2", "<f2"), ("f4", "<f4"), ("f8", "<f8"), ("c8", "<c8"), ("c16", "<c16"),
    ("raw", "V3"), ("ts", "<M8[s]"), ("tns", "<M8[ns]"), ("day", "<M8[D]"), ("td", "<m8[ms]"),
    ("u", "<U4"), ("s", "S5"),
])

# 1-D struct with a nested struct, a non-zero fill value and a missing last chunk.
store = fresh("struct_1d.zarr")
a = zarr.create_array(store, shape=(10,), chunks=(4,), dtype=POINT, fill_value=POINT_FILL)
a[0:8] = point_data(8)
record("struct_1d", store, ["dim_0"])

# 2-D struct with dimension names and an edge chunk on both axes.
store = fresh("grid_2d.zarr")
a = zarr.create_array(store, shape=GRID_SHAPE, chunks=GRID_CHUNKS, dtype=GRID,
                      fill_value=np.zeros((), dtype=GRID)[()], dimension_names=["time", "station"])
a[...] = grid_data(GRID_SHAPE)
record("grid_2d", store, ["time", "station"])

# The same 2-D array through each codec chain.
CODEC_VARIANTS = {
    "codec_big_endian": dict(serializer=BytesCodec(endian="big"), compressors=[GzipCodec(level=5)]),
    "codec_transpose": dict(filters=[TransposeCodec(order=(1, 0))], compressors=[ZstdCodec(level=3)]),
    "codec_blosc": dict(compressors=[BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")]),
    "codec_crc32c": dict(compressors=[Crc32cCodec()]),
    "codec_uncompressed": dict(compressors=None),
    "codec_uncompressed_big_endian": dict(serializer=BytesCodec(endian="big"), compressors=None),
    "codec_sharded": dict(shards=(4, 6), compressors=[ZstdCodec(level=1)]),
}
for name, kwargs in CODEC_VARIANTS.items():
    store = fresh(f"{name}.zarr")
    a = zarr.create_array(store, shape=GRID_SHAPE, chunks=GRID_CHUNKS, dtype=GRID,
                          fill_value=np.zeros((), dtype=GRID)[()],
                          dimension_names=["time", "station"], **kwargs)
    a[...] = grid_data(GRID_SHAPE)
    record(name, store, ["time", "station"])

# Sharding with the big-endian bytes codec inside the shard (index stays little-endian).
store = fresh("codec_sharded_big_endian.zarr")
a = zarr.create_array(store, shape=GRID_SHAPE, chunks=GRID_CHUNKS, shards=(4, 6), dtype=GRID,
                      fill_value=np.zeros((), dtype=GRID)[()], dimension_names=["time", "station"],
                      serializer=BytesCodec(endian="big"), compressors=None)
a[...] = grid_data(GRID_SHAPE)
record("codec_sharded_big_endian", store, ["time", "station"])

# Every field type ndfusion maps, including NaN, NaT, empty and full-width strings.
store = fresh("all_types.zarr")
x = np.zeros(6, dtype=ALL)
x["b"] = [True, False, True, True, False, False]
x["i1"] = [-128, -1, 0, 1, 127, 5]
x["i2"] = [-32768, -2, 0, 2, 32767, 6]
x["i4"] = [-2**31, -3, 0, 3, 2**31 - 1, 7]
x["i8"] = [-2**63, -4, 0, 4, 2**63 - 1, 8]
x["u1"] = [0, 1, 2, 128, 255, 9]
x["u2"] = [0, 1, 2, 2**15, 2**16 - 1, 10]
x["u4"] = [0, 1, 2, 2**31, 2**32 - 1, 11]
x["u8"] = [0, 1, 2, 2**63, 2**64 - 1, 12]
x["f2"] = [0.5, -2.0, np.inf, np.nan, 65504.0, 1e-3]
x["f4"] = [0.1, -2.5, np.inf, np.nan, 3.4e38, -0.0]
x["f8"] = [0.1, -2.5, -np.inf, np.nan, 1.7e308, 5e-324]
x["c8"] = [1 + 2j, -0.5j, 3, np.nan, 0, 1j]
x["c16"] = [1 + 2j, -0.5j, 3, complex(np.inf, -np.inf), 0, 1e300j]
x["raw"] = [b"\x00\x01\x02", b"abc", b"\xff\xff\xff", b"\x00\x00\x00", b"x\x00y", b"zzz"]
x["ts"] = np.array(["2024-01-01T00:00:00", "NaT", "1970-01-01T00:00:01", "1900-06-15T12:30:00",
                    "2262-01-01T00:00:00", "2000-02-29T23:59:59"], dtype="M8[s]")
x["tns"] = np.array(["2024-01-01T00:00:00.123456789", "1970-01-01", "NaT", "1677-09-22",
                     "2262-04-11", "2001-09-09T01:46:40"], dtype="M8[ns]")
x["day"] = np.array(["2024-01-01", "1970-01-01", "1969-12-31", "NaT", "2100-03-01", "1000-01-01"], dtype="M8[D]")
x["td"] = np.array([0, -1500, 86_400_000, np.timedelta64("NaT"), 1, 123456789], dtype="m8[ms]")
x["u"] = ["", "ab", "héllo"[:4], "日本語字", "a", "\U0001F600"]
x["s"] = [b"", b"a", b"abcde", b"ab\x00", b"\x01\x02", b"zz"]
a = zarr.create_array(store, shape=(6,), chunks=(4,), dtype=ALL, compressors=None,
                      fill_value=np.zeros((), dtype=ALL)[()])
a[...] = x
record("all_types", store, ["dim_0"])

# A plain (non-struct) float64 array: one `value` column.
store = fresh("plain_f8.zarr")
a = zarr.create_array(store, shape=(3, 4), chunks=(2, 2), dtype="<f8", fill_value=np.nan,
                      dimension_names=["y", "x"])
a[0:2, :] = np.arange(8, dtype="<f8").reshape(2, 4) / 4
record("plain_f8", store, ["y", "x"])

# A 0-d struct array: one row, no dimension columns.
store = fresh("scalar_0d.zarr")
a = zarr.create_array(store, shape=(), dtype=POINT, fill_value=np.zeros((), dtype=POINT)[()])
a[...] = point_data(1)[0]
record("scalar_0d", store, [])

# Ten million chunks of 1000 elements (10^10 rows), only the first and last written: a
# plan must not grow with the chunk count, and `LIMIT 10` reads one chunk.
store = fresh("ten_million_chunks.zarr")
n = 10_000_000_000
a = zarr.create_array(store, shape=(n,), chunks=(1000,), dtype=GRID,
                      fill_value=np.array((-1.0, -2.0, False), dtype=GRID)[()], dimension_names=["i"])
a[:10] = grid_data((1, 10))[0]
a[n - 5:] = grid_data((2, 5))[1]
def leaves(part, start):
    columns = {"i": list(range(start, start + len(part)))}
    for field in part.dtype.names:
        columns.update(leaf_values(part[field], field))
    return columns
rec.expected["ten_million_chunks"] = {
    "shape": [n], "dims": ["i"],
    "head": leaves(np.asarray(a[:12]), 0),
    "tail": leaves(np.asarray(a[n - 7:]), n - 7),
}

# The REPL's demo table: daily ocean profiles, time x depth, chunked by month.
OCEAN = np.dtype([("temperature", "<f4"), ("salinity", "<f4"), ("qc", "u1")])
store = fresh("../demo/ocean.zarr")
days, depths = 365, 40
t, z = np.indices((days, depths))
ocean = np.zeros((days, depths), dtype=OCEAN)
rng = np.random.default_rng(42)
ocean["temperature"] = (18 + 6 * np.sin(2 * np.pi * t / 365) * np.exp(-z / 12) - 0.25 * z
                        + rng.normal(0, 0.2, (days, depths))).astype(np.float32)
ocean["salinity"] = (35 + 0.02 * z + rng.normal(0, 0.05, (days, depths))).astype(np.float32)
ocean["qc"] = np.where(rng.random((days, depths)) < 0.03, 4, 1)
a = zarr.create_array(store, shape=(days, depths), chunks=(31, depths), dtype=OCEAN,
                      fill_value=np.zeros((), dtype=OCEAN)[()], dimension_names=["day", "depth"],
                      attributes={"title": "ndfusion demo: synthetic daily ocean profiles"})
a[...] = ocean
(HERE / "../demo/expected.json").write_text(json.dumps({
    "rows": days * depths,
    "mean_temperature_depth0": repr(float(ocean["temperature"][:, 0].astype(np.float64).mean())),
    "bad_qc": int((ocean["qc"] == 4).sum()),
}, indent=1) + "\n")

rec.write()

# Broken copies for the error tests: each is struct_1d.zarr with one thing wrong.
BAD = HERE / "bad"
if BAD.exists():
    shutil.rmtree(BAD)
BAD.mkdir()
good = HERE / "struct_1d.zarr"
good_meta = json.loads((good / "zarr.json").read_text())


def broken(name, edit=None, text=None):
    path = BAD / f"{name}.zarr"
    shutil.copytree(good, path)
    if text is not None:
        (path / "zarr.json").write_text(text)
    elif edit is not None:
        meta = json.loads(json.dumps(good_meta))
        edit(meta)
        (path / "zarr.json").write_text(json.dumps(meta, indent=2))
    return path


fields = lambda m: m["data_type"]["configuration"]["fields"]
broken("truncated_json", text=(good / "zarr.json").read_text()[:150])
broken("not_json", text="this is not json\n")
broken("duplicate_fields", lambda m: fields(m).append({"name": "id", "data_type": "int8"}))
broken("zero_fields", lambda m: fields(m).clear())
broken("string_field", lambda m: fields(m).append({"name": "label", "data_type": "string"}))
broken("bytes_field", lambda m: fields(m).append({"name": "blob", "data_type": "bytes"}))
broken("fill_missing_field", lambda m: m["fill_value"].pop("value"))
broken("fill_wrong_type", lambda m: m["fill_value"].update(flags="many"))
broken("no_endian", lambda m: m["codecs"][0].pop("configuration"))
broken("unsupported_codec", lambda m: m["codecs"].append({"name": "made_up_codec", "configuration": {}}))
broken("unsupported_serializer", lambda m: m["codecs"].__setitem__(0, {"name": "vlen-utf8"}))
p = broken("corrupt_chunk")
(p / "c" / "1").write_bytes(b"\x28\xb5\x2f\xfd this is not a zstd frame")
zarr.open_group(str(BAD / "group.zarr"), mode="w").create_array("child", shape=(2,), dtype="i4")
