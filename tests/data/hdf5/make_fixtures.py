"""Writes the plain HDF5 fixtures of ndfusion's tests (`STORED AS HDF5`) and what h5py reads
from them.

Run from the repository root:

    PYENV_VERSION=3.12.1 python3.12 -m pip install h5py==3.16.0 hdf5plugin==7.1.0 numpy
    PYENV_VERSION=3.12.1 python3.12 tests/data/hdf5/make_fixtures.py

Files:
- `single.h5`: one dataset (`/counts`, big-endian int16, contiguous, no dimension scales):
  read without `path`, its dimension named `dim_0`.
- `records.h5`: compound datasets, as h5py writes NumPy structured arrays (packed):
  `/obs/records` (10 records in chunks of 4, gzip + shuffle, 6 written: the last chunk is
  the fill value) with an integer, a float array member, a fixed-length string, a nested
  compound and a double; `/obs/grid` (2-D, zstd, one member big-endian, dimension scales
  `/obs/y` and `/obs/x` attached); `/flags` (HDF5 enums: h5py's bool and a coded int8);
  `/padded` (compounds as C aligns them: unused bytes between members, a nested padded
  compound, an array member of them, members out of offset order; gzip + shuffle).
- `deep.h5`: one dataset 40 groups down.
- `filters.h5`: HDF5's own lossy/packing filters, as HDF5 writes them: `/scaleoffset_int`
  (int32, integer scale-offset with the minimum bits found by HDF5, a fill value, gzip after
  it), `/scaleoffset_float` (float32, D-scale with 2 decimal digits: h5py reads the rounded
  values), `/nbit` (a 12-bit signed integer datatype in 2 bytes, packed by the n-bit filter; HDF5 2
  refuses more than 7 unused bits),
  `/nbit_be` (the same, big-endian, an unwritten chunk); Fletcher-32 on compounds of an odd
  size (chunks of an odd number of bytes): `/fletcher32_records`, `/fletcher32_grid` (gzip).
- `bits.h5`: integers that keep their value in fewer bits than their size, without the n-bit
  filter (h5py's `set_precision`/`set_offset`; HDF5 hands readers the value shifted down and
  sign-extended): `/bits` (12 bits from bit 2 of a little-endian int16, contiguous),
  `/bits_be` (10 bits from bit 3 of a big-endian uint16, chunks of 4, gzip, a fill value of
  77 and an unwritten chunk), `/g` (a group read as a dataset: `level`, 12 bits from bit 1
  of an int16 with a fill value, over the dimension scale `z`), and `/compound` (such an
  integer as a compound's member: not read).
- `btree.h5`: chunk B-trees (version 1, as netCDF-C writes them) several levels deep: nodes of
  at most 4 entries (`istore_k` 2, where libhdf5's default is 32): `/grid` (24 x 20 int32 in
  chunks of 2 x 3, written in a shuffled order, a quarter of them never written: the fill
  value 7) and `/line` (100 float64 in chunks of 1, gzip, every third never written: NaN).
- `strings.h5`: variable-length strings (UTF-8 and ASCII, 1-D and chunked 2-D with chunks
  never written, string attributes; compounds with string members, and one with a string in a
  nested compound, not read yet).
- `scales.h5`: h5py's dimension scales and attributes in the netCDF-4 data model (`time`,
  `station`, `temp`): a group read as a dataset, compared with xarray (h5netcdf engine).

`expected.json` holds, for each dataset (`file.h5:/path`), h5py's reading: its element
rows in C order (dimension indices, then each member: floats as `repr` strings, bytes as
hex, nested compounds as objects, array members as lists) and its attributes; for
`scales.h5:/`, xarray's `to_dataframe().reset_index()` as in `netcdf/expected.json`.
"""

import ctypes
import json
from pathlib import Path

import h5py
import hdf5plugin
import numpy as np
import xarray as xr

HERE = Path(__file__).parent
EXPECTED = {}


def value(v):
    """One element (or member) as JSON, as the tests compare it."""
    if isinstance(v, np.void) and v.dtype.names:
        return {name: value(v[name]) for name in v.dtype.names}
    if isinstance(v, np.ndarray):
        return [value(x) for x in v]
    if isinstance(v, (bytes, np.bytes_)):
        return bytes(v).hex()
    if isinstance(v, (np.floating, float)):
        return repr(float(v))
    if isinstance(v, (np.bool_, bool)):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, str):
        return v
    raise TypeError(f"no JSON for {v!r} ({type(v)})")


def attr(v):
    if isinstance(v, np.ndarray):
        return [attr(x) for x in v]
    if isinstance(v, (bytes, np.bytes_)):
        return bytes(v).decode()
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


# HDF5's own attributes for dimension scales are not a dataset's attributes to ndfusion.
HIDDEN = {"DIMENSION_LIST", "REFERENCE_LIST", "CLASS", "NAME", "_Netcdf4Dimid"}


def is_vlen_string(dtype):
    info = h5py.check_string_dtype(dtype)
    return info is not None and info.length is None


def record(path, name, dims=None):
    with h5py.File(HERE / path, "r") as f:
        ds = f[name]
        # Variable-length strings as text (h5py's `asstr()`), as ndfusion reads them (Utf8).
        data = ds.asstr()[()] if h5py.check_string_dtype(ds.dtype) else ds[()]
        names = dims or [f"dim_{i}" for i in range(data.ndim)]
        rows = []
        for index in np.ndindex(data.shape):
            row = dict(zip(names, index))
            element = data[index]
            if data.dtype.names:
                # Variable-length string members as text, as ndfusion reads them (h5py
                # gives bytes).
                row.update({
                    m: element[m].decode() if is_vlen_string(ds.dtype[m]) else value(element[m])
                    for m in data.dtype.names
                })
            else:
                row["value"] = value(element)
            rows.append(row)
        EXPECTED[f"{path}:{name}"] = {
            "rows": rows,
            "attrs": {k: attr(v) for k, v in ds.attrs.items() if k not in HIDDEN},
        }


def column_value(v):
    """A cell of xarray's dataframe as `netcdf/expected.json` has it (NaN as null)."""
    if isinstance(v, np.datetime64):
        return int(v.astype("datetime64[ns]").astype("i8"))
    if isinstance(v, np.floating) and np.isnan(v):
        return None
    return value(v)


def record_group(path, group):
    """xarray's `to_dataframe().reset_index()` of a group (h5netcdf engine)."""
    with xr.open_dataset(HERE / path, engine="h5netcdf", group=group) as ds:
        df = ds.to_dataframe().reset_index()
        EXPECTED[f"{path}:{group}"] = {
            "columns": list(df.columns),
            "dtypes": {c: str(df[c].dtype) for c in df.columns},
            "rows": len(df),
            "values": {c: [column_value(v) for v in df[c].to_numpy()] for c in df.columns},
            "attrs": {k: attr(v) for k, v in ds.attrs.items()},
        }


def fresh(name):
    path = HERE / name
    path.unlink(missing_ok=True)
    return path


# ---------------------------------------------------------------- single.h5
with h5py.File(fresh("single.h5"), "w") as f:
    counts = f.create_dataset("counts", data=np.array([3, -1, 400, 7, -32768], dtype=">i2"))
    counts.attrs["units"] = "1"
    counts.attrs["valid_range"] = np.array([-100, 1000], dtype="i4")
record("single.h5", "/counts")

# ---------------------------------------------------------------- records.h5
inner = np.dtype([("flag", "u1"), ("level", "<i2")])
rec = np.dtype(
    [("id", "<i4"), ("pos", "<f4", (3,)), ("name", "S6"), ("meta", inner), ("value", "<f8")]
)
with h5py.File(fresh("records.h5"), "w") as f:
    obs = f.create_group("obs")
    fill = np.array((-1, (9.0, 9.0, 9.0), b"none", (0, -9), np.nan), dtype=rec)
    records = obs.create_dataset(
        "records", shape=(10,), chunks=(4,), dtype=rec, compression="gzip", shuffle=True,
        fillvalue=fill[()],
    )
    written = np.zeros(6, dtype=rec)
    for i in range(6):
        written[i] = (
            100 + i,
            (i * 0.5, -i * 1.25, 1e6 + i),
            [b"alpha", b"b", b"", b"delta6", b"e\x00f", b"zeta"][i],
            (i % 2, -300 * i),
            [1.5, -0.0, 1e-300, np.inf, 2.5e10, -7.75][i],
        )
    records[:6] = written
    records.attrs["title"] = "buoy records"
    records.attrs["version"] = np.int32(2)

    grid_t = np.dtype([("temp", "<f4"), ("count", ">u2")])
    grid = np.zeros((3, 4), dtype=grid_t)
    grid["temp"] = np.arange(12, dtype="f4").reshape(3, 4) * 1.5 - 4
    grid["count"] = np.arange(12, dtype="u2").reshape(3, 4) * 1000
    g = obs.create_dataset("grid", data=grid, chunks=(2, 2), **hdf5plugin.Zstd(clevel=3))
    y = obs.create_dataset("y", data=np.array([10, 20, 30], dtype="i4"))
    x = obs.create_dataset("x", data=np.array([0.5, 1.5, 2.5, 3.5], dtype="f8"))
    y.make_scale("y")
    x.make_scale("x")
    g.dims[0].attach_scale(y)
    g.dims[1].attach_scale(x)

    flags = np.zeros(4, dtype=[("ok", "?"), ("code", h5py.enum_dtype({"LOW": 0, "HIGH": 7}, basetype="i1"))])
    flags["ok"] = [True, False, True, True]
    flags["code"] = [0, 7, 7, 0]
    f.create_dataset("flags", data=flags)

    # Compounds as C writes them: members aligned (unused bytes between them), a nested
    # compound, an array of padded compounds, members out of offset order.
    inner_t = np.dtype({"names": ["x", "y"], "formats": ["<i2", "u1"], "offsets": [0, 4], "itemsize": 8})
    padded_t = np.dtype(
        {
            "names": ["late", "a", "b", "c", "pairs"],
            "formats": ["<i4", "u1", "<f8", inner_t, (inner_t, (2,))],
            "offsets": [40, 0, 8, 16, 24],
            "itemsize": 48,
        }
    )
    padded = np.zeros(3, dtype=padded_t)
    padded["late"] = [7, -8, 9]
    padded["a"] = [1, 2, 255]
    padded["b"] = [0.25, -1e10, 3.5]
    padded["c"]["x"] = [-5, 6, 7]
    padded["c"]["y"] = [10, 20, 30]
    padded["pairs"]["x"] = [[1, 2], [3, 4], [5, 6]]
    padded["pairs"]["y"] = [[11, 12], [13, 14], [15, 16]]
    f.create_dataset("padded", data=padded, chunks=(2,), compression="gzip", shuffle=True)
record("records.h5", "/obs/records")
record("records.h5", "/obs/grid", dims=["y", "x"])
record("records.h5", "/flags")
record("records.h5", "/padded")

# ---------------------------------------------------------------- deep.h5
# One dataset 40 groups down (libver latest: compact groups, a small file): ndfusion's search
# for a file's one dataset stops at 32 levels; a `path` reads it.
with h5py.File(fresh("deep.h5"), "w", libver="latest") as f:
    g = f
    for i in range(40):
        g = g.create_group(f"g{i}")
    g.create_dataset("v", data=np.array([1.5, 2.5], dtype="<f4"))
record("deep.h5", "/" + "/".join(f"g{i}" for i in range(40)) + "/v")

# ---------------------------------------------------------------- filters.h5
with h5py.File(fresh("filters.h5"), "w") as f:
    ints = np.array([0, 5, -7, 1000, 2047, -2048, 3, 3, 42, -1, 600, 17], dtype="<i4")
    so = f.create_dataset(
        "scaleoffset_int", data=ints, chunks=(5,), scaleoffset=0, compression="gzip", fillvalue=-9
    )
    so.attrs["units"] = "counts"
    floats = (np.arange(10, dtype="<f4") * 1.2345 - 3.3).astype("<f4")
    f.create_dataset("scaleoffset_float", data=floats, chunks=(4,), scaleoffset=2)
    for name, base, data in [
        ("nbit", h5py.h5t.STD_I16LE, ints.astype("<i2")),
        ("nbit_be", h5py.h5t.STD_I16BE, ints[:8].astype(">i2")),
    ]:
        tid = base.copy()
        tid.set_precision(12)
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((4,))
        dcpl.set_filter(h5py.h5z.FILTER_NBIT, h5py.h5z.FLAG_OPTIONAL)  # H5Pset_nbit
        space = h5py.h5s.create_simple((len(ints),))
        ds = h5py.Dataset(h5py.h5d.create(f.id, name.encode(), tid, space, dcpl=dcpl))
        ds[: len(data)] = data
record("filters.h5", "/scaleoffset_int")
record("filters.h5", "/scaleoffset_float")
record("filters.h5", "/nbit")
record("filters.h5", "/nbit_be")

# Fletcher-32 checksums on compounds of an odd size (35 bytes: a nested compound and an array
# member), so chunks of 3 records are 105 bytes: an odd length, whose last byte the checksum
# counts as libhdf5 does. `/fletcher32_records` is checked alone, the last chunk an edge;
# `/fletcher32_grid` after deflate, chunks splitting both dimensions.
inner = np.dtype([("level", "<i2"), ("flag", "u1")])
odd = np.dtype([("id", "<i4"), ("pos", "<f8", (3,)), ("meta", inner), ("x", "<f4")])
assert odd.itemsize == 35
with h5py.File(HERE / "filters.h5", "a") as f:
    n = 23
    recs = np.zeros(n, odd)
    recs["id"] = np.arange(n) * 3 - 10
    recs["pos"] = np.arange(3 * n).reshape(n, 3) / 3
    recs["meta"]["level"] = np.arange(n) - 5
    recs["meta"]["flag"] = np.arange(n) * 37 % 256
    recs["x"] = np.arange(n, dtype="f4") / 7
    f.create_dataset("fletcher32_records", data=recs, chunks=(3,), fletcher32=True)
    grid = np.zeros((7, 5), odd)
    grid["id"] = np.arange(35).reshape(7, 5)
    grid["pos"] = np.arange(105).reshape(7, 5, 3) * 0.5
    grid["meta"]["flag"] = 200
    f.create_dataset(
        "fletcher32_grid", data=grid, chunks=(3, 3), fletcher32=True, compression="gzip"
    )
record("filters.h5", "/fletcher32_records")
record("filters.h5", "/fletcher32_grid")

# ---------------------------------------------------------------- bits.h5
def reduced(group, name, base, precision, offset, data, shape, chunks=None, fill=None):
    tid = base.copy()
    tid.set_precision(precision)
    tid.set_offset(offset)
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    if chunks:
        dcpl.set_chunk(chunks)
        dcpl.set_deflate(4)
    if fill is not None:
        dcpl.set_fill_value(np.array(fill, dtype=data.dtype))
    space = h5py.h5s.create_simple(shape)
    ds = h5py.Dataset(h5py.h5d.create(group.id, name.encode(), tid, space, dcpl=dcpl))
    ds[: len(data)] = data
    return ds


with h5py.File(fresh("bits.h5"), "w") as f:
    signed = np.array([-1, 0, 1, 2047, -2048, 5, -300], dtype="<i2")
    reduced(f, "bits", h5py.h5t.STD_I16LE, 12, 2, signed, (7,))
    unsigned = np.array([0, 1, 1023, 512, 7, 300], dtype=">u2")
    reduced(f, "bits_be", h5py.h5t.STD_U16BE, 10, 3, unsigned, (10,), chunks=(4,), fill=77)
    g = f.create_group("g")
    z = g.create_dataset("z", data=np.arange(6, dtype="f8") * 10)
    z.make_scale("z")
    level = reduced(g, "level", h5py.h5t.STD_I16LE, 12, 1, signed[:4], (6,), chunks=(2,), fill=-9)
    level.dims[0].attach_scale(z)
    member = h5py.h5t.STD_I16LE.copy()
    member.set_precision(12)
    ctype = h5py.h5t.create(h5py.h5t.COMPOUND, 4)
    ctype.insert(b"a", 0, member)
    ctype.insert(b"b", 2, h5py.h5t.STD_I16LE)
    space = h5py.h5s.create_simple((2,))
    h5py.h5d.create(f.id, b"compound", ctype, space)
record("bits.h5", "/bits")
record("bits.h5", "/bits_be")
record_group("bits.h5", "/g")

# ---------------------------------------------------------------- btree.h5
# Small B-tree nodes make a tree of several levels from a few chunks (ndfusion searches it
# chunk by chunk, reading the nodes on the way).
# h5py has no binding for H5Pset_istore_k: called in the libhdf5 h5py loaded.
libhdf5 = ctypes.CDLL(next((Path(h5py.__file__).parent.parent / "h5py.libs").glob("libhdf5-*")))
fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
assert libhdf5.H5Pset_istore_k(ctypes.c_int64(fcpl.id), ctypes.c_uint(2)) >= 0
fid = h5py.h5f.create(bytes(fresh("btree.h5")), h5py.h5f.ACC_TRUNC, fcpl=fcpl)
with h5py.File(fid) as f:
    grid = f.create_dataset("grid", shape=(24, 20), chunks=(2, 3), dtype="i4", fillvalue=7)
    values = np.arange(480, dtype="i4").reshape(24, 20) * 3 - 500
    chunks = [(i, j) for i in range(12) for j in range(7)]
    rng = np.random.default_rng(43)
    rng.shuffle(chunks)
    for i, j in chunks[: 3 * len(chunks) // 4]:
        at = np.s_[2 * i : 2 * i + 2, 3 * j : 3 * j + 3]
        grid[at] = values[at]
    line = f.create_dataset(
        "line", shape=(100,), chunks=(1,), dtype="f8", compression="gzip", fillvalue=np.nan
    )
    for i in rng.permutation(100):
        if i % 3:
            line[i] = i / 4
record("btree.h5", "/grid")
record("btree.h5", "/line")

# ---------------------------------------------------------------- strings.h5
# Variable-length strings (h5py.string_dtype()): `/names` (UTF-8, an empty one, a vlen string
# attribute and an array of them), `/grid` (chunks splitting both dimensions, gzip, chunks
# never written: h5py reads ""), `/ascii` (ASCII), `/long` (20,000 bytes of strings), `/records`
# (a compound with vlen string members beside a number, a nested compound and an array),
# `/many_records` and `/long_names` (such records over the metadata limits: sql/hdf5.slt),
# `/nested` (a vlen string in a nested compound: not
# read yet, an error naming the member).
with h5py.File(fresh("strings.h5"), "w") as f:
    names = f.create_dataset(
        "names", data=np.array(["alpha", "béta", "", "γάμμα δ"], dtype=object),
        dtype=h5py.string_dtype(),
    )
    names.attrs["long_name"] = "station names"
    names.attrs["labels"] = np.array(["x", "yy"], dtype=object)
    grid = f.create_dataset(
        "grid", shape=(5, 4), chunks=(2, 3), dtype=h5py.string_dtype(), compression="gzip"
    )
    grid[0:4, 0:3] = np.array(
        [[f"r{i}c{j}" * (i + 1) for j in range(3)] for i in range(4)], dtype=object
    )
    f.create_dataset(
        "ascii", data=np.array([b"ab", b"", b"cde"], dtype=object),
        dtype=h5py.string_dtype("ascii"),
    )
    # Two strings of 10,000 characters: 32 bytes of references, 20,000 of strings (the
    # metadata limit counts both).
    f.create_dataset(
        "long", data=np.array(["x" * 10000, "y" * 10000], dtype=object),
        dtype=h5py.string_dtype(),
    )
    # Compound records with vlen string members (UTF-8 and ASCII) beside a number and a
    # nested compound: chunks of 3, gzip, the last chunk never written (h5py: 0, b"").
    records = np.dtype([
        ("id", "<i4"), ("name", h5py.string_dtype()), ("pos", [("x", "<f8"), ("y", "<f8")]),
        ("code", h5py.string_dtype("ascii")), ("vec", "<i2", (3,)),
    ])
    d = f.create_dataset("records", shape=(7,), chunks=(3,), dtype=records, compression="gzip")
    d[0:4] = np.array([
        (1, "one", (0.5, -1.0), b"A", (1, 2, 3)), (2, "", (1.5, 2.0), b"", (-1, 0, 1)),
        (3, "très", (2.5, 3.0), b"CC", (7, 8, 9)), (4, "four", (3.5, 4.0), b"D", (0, 0, -7)),
    ], dtype=records)
    d.attrs["title"] = "records with names"
    # Read whole when the table opens, within the metadata limit: 4,000 records of 58 bytes
    # (232,000 bytes), and 8 records whose names hold 80,000 bytes.
    d = f.create_dataset("many_records", shape=(4000,), dtype=records)
    d[:2] = np.array([(1, "a", (0.0, 0.0), b"", (0, 0, 0))] * 2, dtype=records)
    f.create_dataset("long_names", data=np.array(
        [(i, "n" * 10000, (0.0, 0.0), b"", (0, 0, 0)) for i in range(8)], dtype=records))
    # A vlen string inside a nested compound: not read yet, an error naming the member.
    nested = np.dtype([("id", "<i4"), ("tag", [("label", h5py.string_dtype())])])
    f.create_dataset("nested", data=np.array([(1, ("a",))], dtype=nested))
record("strings.h5", "/names")
record("strings.h5", "/grid")
record("strings.h5", "/ascii")
record("strings.h5", "/records")

# ---------------------------------------------------------------- scales.h5
with h5py.File(fresh("scales.h5"), "w") as f:
    f.attrs["title"] = "h5py scales"
    t = f.create_dataset("time", data=np.array([0, 6, 12], dtype="i8"))
    t.attrs["units"] = "hours since 2020-01-01"
    t.make_scale("time")
    s = f.create_dataset("station", data=np.array([101, 102], dtype="i4"))
    s.make_scale("station")
    temp = f.create_dataset(
        "temp", data=np.arange(6, dtype="f4").reshape(3, 2) - 1.5, chunks=(2, 1), compression="gzip"
    )
    temp.dims[0].attach_scale(t)
    temp.dims[1].attach_scale(s)
    temp.attrs["_FillValue"] = np.float32(-1.5)
record_group("scales.h5", "/")

(HERE / "expected.json").write_text(json.dumps(EXPECTED, indent=1, sort_keys=True) + "\n")
