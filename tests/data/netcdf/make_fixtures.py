"""Writes the netCDF fixtures of ndfusion's tests and what xarray reads from them.

Run from the repository root:

    PYENV_VERSION=3.12.1 python3.12 -m pip install xarray==2026.9.0 netCDF4==1.7.5 \
        scipy==1.18.0 pandas h5netcdf==1.8.2 h5py==3.16.0 hdf5plugin==7.1.0 zarr==3.4.2
    PYENV_VERSION=3.12.1 python3.12 tests/data/netcdf/make_fixtures.py

Files (netCDF-3, every variant of it):
- `classic.nc` (CDF-1, netCDF4-python's NETCDF3_CLASSIC): an unlimited `time` (CF times),
  `lat`, `lon`; record variables `temp` (float32, a _FillValue and a masked cell) and `pres`
  (int16 packed with float32 scale_factor / add_offset, so xarray unpacks in float32; its
  2-byte records padded to 4 in the file), a fixed `land` (byte with `_Unsigned`), `station`
  (characters joined into strings, `_Encoding` utf-8), a scalar `crs`, a non-dimension
  coordinate `depth`, and global attributes of several types.
- `offset64.nc` (CDF-2, NETCDF3_64BIT_OFFSET): int16 records of 6 bytes (padded to 8),
  packed with float64 attributes and a `missing_value`; times in the `noleap` calendar
  across a February 29th that calendar does not have.
- `one_record_var.nc` (CDF-2): exactly one record variable, whose 6-byte records are not
  padded (the format's one exception), and no coordinate for its dimensions.
- `cdf5.nc` (CDF-5, NETCDF3_64BIT_DATA): the unsigned and 64-bit types.
- `scipy.nc`: written by scipy 1.18's `netcdf_file` (version 2), a record dimension.
- `records.nc` (CDF-1): 24 records of a 256 x 256 int16 `sst` packed with float64
  scale_factor / add_offset (128 KiB a record, so chunks of 8 records): the file the pushdown
  tests read part of. `expected.json` has its aggregates over ranges, not its rows.

Files (netCDF-4, HDF5 underneath):
- `nc4.nc` (NETCDF4): deflate + shuffle, fletcher32, zstd and bzip2 (hdf5plugin's filters),
  big-endian types, contiguous storage, unwritten chunks, packed and masked values,
  characters, a scalar.
- `nc4_classic.nc` (NETCDF4_CLASSIC): packed int16 with `missing_value`, a noleap calendar.
- `h5netcdf.nc`: h5netcdf 1.8.2 (v1 B-tree indexes), gzip + shuffle, blosc with chunks it
  stored unfiltered, lz4 in small blocks.
- `indexes.nc`: the newer chunk indexes (single chunk, fixed array, extensible array, v2
  B-tree, implicit).
- `groups.nc`: groups, read with `path` (`groups/obs`, `groups/obs/deep` in expected.json).
- `ranges.nc`: 100 chunks of packed int16 (deflate + shuffle): what a 1% time range
  fetches from an object store (`expected.json` has the file's size and that range's sum).
- `szip.nc`: the szip filter (nearest-neighbour and entropy coding, 16- and 32-bit samples).
- `enum.nc`: enum variables (read as their base integers, as xarray reads them).
- `bounds.nc`: CF cell bounds (`time_bnds` decoded with its coordinate's units and calendar).
- `compound.nc`: a compound variable (nested, array and character members, gaps between
  members, an unwritten chunk), one `Struct` column as xarray shows it (`rows` in
  expected.json: each row an object, records as objects).
- `vlen.nc`: vlen variables (lists of numbers, `rows` in expected.json as for compound.nc).
- `skipped.nc`: variables netCDF4-python leaves out (opaque, a vlen of compounds, compounds
  with enum, opaque or vlen members: h5py), beside a coordinate and a number.
- `user_block.nc`: a netCDF-4 file whose superblock follows a 1 KiB user block.
- `strings.nc`: NC_STRING variables (a coordinate, a chunked 2-D one, a scalar).
- `bitshuffle.nc`: a filter ndfusion does not decode (no expected values).
- `shipped/`: the netCDF files in xarray 2026.9.0's and scipy 1.18.0's packages, copied as
  they are (xarray: Apache-2.0; scipy: BSD-3-Clause).

`expected.json` holds, for each file, what `xr.open_dataset(path).to_dataframe()
.reset_index()` shows (the netCDF4 engine, xarray's defaults): the columns in order, their
dtypes, and the values (floats as `repr` strings, NaN as null, times as integer nanoseconds,
bytes as hex); and the global attributes.
"""

import json
import os
import shutil
import sys
import warnings
from pathlib import Path

# The HDF5 filters netCDF-C loads as plugins (zstd, bzip2, blosc) are hdf5plugin 7.1's:
# its path is set before netCDF-C starts (the netCDF4 wheel ships none).
import hdf5plugin  # noqa: E402

os.environ["HDF5_PLUGIN_PATH"] = hdf5plugin.PLUGIN_PATH
import netCDF4
import numpy as np
import scipy
import scipy.io
import xarray as xr

assert xr.__version__ == "2026.9.0", xr.__version__
assert netCDF4.__version__ == "1.7.5", netCDF4.__version__
assert scipy.__version__ == "1.18.0", scipy.__version__
warnings.filterwarnings("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from fixture_common import dataframe_column  # noqa: E402

HERE = Path(__file__).resolve().parent
EXPECTED = {}


def column(values):
    if values.dtype == object and any(isinstance(v, bytes) for v in values):
        return [v.hex() if isinstance(v, bytes) else None for v in values]
    return dataframe_column(values)


def attr(v):
    if isinstance(v, np.ndarray):
        return [attr(x) for x in v.tolist()]
    if isinstance(v, (np.floating, float)):
        return repr(float(v))
    if isinstance(v, np.generic):
        return v.item()
    return v


def record(name, path, group=None, engine=None):
    with xr.open_dataset(path, group=group, engine=engine) as ds:
        df = ds.to_dataframe().reset_index()
        EXPECTED[name] = {
            "columns": list(df.columns),
            "dtypes": {c: str(df[c].dtype) for c in df.columns},
            "rows": len(df),
            "values": {c: column(df[c].to_numpy()) for c in df.columns},
            "attrs": {k: attr(v) for k, v in ds.attrs.items()},
        }


def fresh(name):
    path = HERE / name
    path.unlink(missing_ok=True)
    return path


# ---------------------------------------------------------------- classic.nc
path = fresh("classic.nc")
with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as nc:
    nc.title = "ndfusion netCDF-3 classic fixture"
    nc.institution = "ndfusion tests"
    nc.version = np.int32(3)
    nc.resolution = np.float32(0.25)
    nc.valid_years = np.array([2020, 2021], dtype="i2")
    nc.createDimension("time", None)
    nc.createDimension("lat", 3)
    nc.createDimension("lon", 4)
    nc.createDimension("name_len", 5)
    t = nc.createVariable("time", "f8", ("time",))
    t.units = "hours since 2020-01-01 00:00:00"
    t.calendar = "standard"
    lat = nc.createVariable("lat", "f4", ("lat",))
    lat.units = "degrees_north"
    lon = nc.createVariable("lon", "f8", ("lon",))
    temp = nc.createVariable("temp", "f4", ("time", "lat", "lon"), fill_value=np.float32(-999.0))
    temp.units = "degC"
    temp.coordinates = "depth"
    pres = nc.createVariable("pres", "i2", ("time",), fill_value=np.int16(-32767))
    pres.scale_factor = np.float32(0.1)
    pres.add_offset = np.float32(1000.0)
    land = nc.createVariable("land", "i1", ("lat", "lon"))
    land._Unsigned = "true"
    station = nc.createVariable("station", "S1", ("lat", "name_len"))
    station._Encoding = "utf-8"
    crs = nc.createVariable("crs", "i4", ())
    crs.grid_mapping_name = "latitude_longitude"
    depth = nc.createVariable("depth", "f4", ("lat",))
    depth.positive = "down"
    nc.set_auto_maskandscale(False)
    t[:] = np.array([0.0, 6.0, 12.5, 18.0, 24.0])
    lat[:] = np.array([-10.0, 0.0, 10.5], dtype="f4")
    lon[:] = np.array([100.0, 101.25, 102.5, 103.75])
    values = (np.arange(5 * 3 * 4, dtype="f4").reshape(5, 3, 4) * 0.5 - 3).astype("f4")
    values[2, 1, 3] = -999.0
    temp[:] = values
    pres[:] = np.array([13, -25, -32767, 7, 32000], dtype="i2")
    land[:] = np.array([[0, 1, -1, -128], [5, 127, -2, 3], [0, 0, 0, -56]], dtype="i1")
    names = ["north", "mid", "sü"]
    chars = np.zeros((3, 5), dtype="S1")
    for i, n in enumerate(names):
        b = n.encode("utf-8")
        chars[i, : len(b)] = [bytes([c]) for c in b]
    station[:] = chars
    crs.assignValue(4326)
    depth[:] = np.array([5.0, 10.0, 250.5], dtype="f4")
record("classic", path)

# ---------------------------------------------------------------- offset64.nc
path = fresh("offset64.nc")
with netCDF4.Dataset(path, "w", format="NETCDF3_64BIT_OFFSET") as nc:
    nc.source = "offset64"
    nc.createDimension("time", None)
    nc.createDimension("probe", 3)
    t = nc.createVariable("time", "i4", ("time",))
    t.units = "days since 2000-02-27"
    t.calendar = "noleap"
    # 6 bytes a record, padded to 8 in the file.
    level = nc.createVariable("level", "i2", ("time", "probe"))
    level.scale_factor = 0.01
    level.add_offset = 20.0
    level.missing_value = np.int16(-1)
    nc.set_auto_maskandscale(False)
    t[:] = np.array([0, 1, 2, 3], dtype="i4")
    level[:] = np.array([[100, 200, -1], [0, 1, 2], [-300, 32767, -32768], [5, -1, 7]], dtype="i2")
record("offset64", path)

# A file with exactly one record variable (records not padded): `obs` on the record
# dimension, no coordinate variable for it.
path = fresh("one_record_var.nc")
with netCDF4.Dataset(path, "w", format="NETCDF3_64BIT_OFFSET") as nc:
    nc.createDimension("obs", None)
    nc.createDimension("sensor", 3)
    v = nc.createVariable("reading", "i2", ("obs", "sensor"))
    v[:] = np.arange(7 * 3, dtype="i2").reshape(7, 3) * 3 - 10
record("one_record_var", path)

# ---------------------------------------------------------------- cdf5.nc
path = fresh("cdf5.nc")
with netCDF4.Dataset(path, "w", format="NETCDF3_64BIT_DATA") as nc:
    nc.createDimension("x", 4)
    nc.createDimension("t", None)
    x = nc.createVariable("x", "u8", ("x",))
    x[:] = np.array([1, 2, 2**40, 2**63 + 5], dtype="u8")
    for name, dtype in [("u1", "u1"), ("u2", "u2"), ("u4", "u4"), ("i8", "i8")]:
        v = nc.createVariable(name, dtype, ("t", "x"))
        info = np.iinfo(dtype)
        v[:] = np.array([[info.min, info.max, 1, 2], [3, 4, 5, info.max - 1]], dtype=dtype)
    masked = nc.createVariable("masked", "u2", ("x",), fill_value=np.uint16(65535))
    nc.set_auto_maskandscale(False)
    masked[:] = np.array([1, 65535, 3, 65534], dtype="u2")
record("cdf5", path)

# ---------------------------------------------------------------- scipy.nc
path = fresh("scipy.nc")
with scipy.io.netcdf_file(path, "w", version=2) as f:
    f.history = "written by scipy"
    f.createDimension("time", None)
    f.createDimension("x", 2)
    t = f.createVariable("time", "i4", ("time",))
    t.units = "seconds since 2000-01-01"
    t[:] = np.array([0, 60, 3600], dtype="i4")
    v = f.createVariable("v", "f8", ("time", "x"))
    v._FillValue = -1.0
    v[:] = np.array([[1.5, -1.0], [2.5, 3.5], [np.nan, 4.0]])
record("scipy", path)

# ---------------------------------------------------------------- records.nc
path = fresh("records.nc")
with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as nc:
    nc.createDimension("time", None)
    nc.createDimension("y", 256)
    nc.createDimension("x", 256)
    t = nc.createVariable("time", "i4", ("time",))
    t.units = "days since 2000-01-01"
    y = nc.createVariable("y", "f4", ("y",))
    x = nc.createVariable("x", "f4", ("x",))
    sst = nc.createVariable("sst", "i2", ("time", "y", "x"), fill_value=np.int16(-32768))
    sst.scale_factor = 0.001
    sst.add_offset = 15.0
    nc.set_auto_maskandscale(False)
    t[:] = np.arange(24, dtype="i4") * 7
    y[:] = np.arange(256, dtype="f4") * 0.5
    x[:] = np.arange(256, dtype="f4") * 0.5 + 100
    k, j, i = np.indices((24, 256, 256))
    raw = ((k * 97 + j * 31 + i * 7) % 20001 - 10000).astype("i2")
    raw[raw % 1000 == 0] = -32768
    sst[:] = raw
with xr.open_dataset(path) as ds:
    sst = ds["sst"]
    assert sst.dtype == np.float64
    EXPECTED["records"] = {
        "count": int(sst.count()),
        "sum": repr(float(sst.sum())),
        "weeks_3_to_5": {
            "count": int(sst.isel(time=slice(3, 6)).count()),
            "max": repr(float(sst.isel(time=slice(3, 6)).max())),
            "min": repr(float(sst.isel(time=slice(3, 6)).min())),
        },
        "last_time": int(ds["time"].values[-1].astype("datetime64[ns]").astype("i8")),
    }

# ---------------------------------------------------------------- netCDF-4
# nc4.nc (netCDF4-python, format NETCDF4: HDF5 written by netCDF-C 4.10 on HDF5 2.2, whose
# chunk indexes are fixed arrays for fixed dimensions and extensible arrays for one
# unlimited dimension, B-tree v2 for two): deflate, shuffle, fletcher32, zstd and bzip2
# (blosc: h5netcdf.nc), big-endian data,
# contiguous and compact storage, unwritten chunks, packed and masked values, characters,
# a scalar, strings among the global attributes.
path = fresh("nc4.nc")
with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
    nc.title = "ndfusion netCDF-4 fixture"
    nc.version = np.int32(4)
    nc.keywords = ["ocean", "test"]
    nc.setncattr_string("history", "written by make_fixtures.py")
    nc.createDimension("time", None)
    nc.createDimension("lat", 3)
    nc.createDimension("lon", 4)
    nc.createDimension("name_len", 5)
    nc.createDimension("cell", 10)
    t = nc.createVariable("time", "f8", ("time",))
    t.units = "hours since 2020-01-01 00:00:00"
    lat = nc.createVariable("lat", "f4", ("lat",))
    lat.units = "degrees_north"
    lon = nc.createVariable("lon", "f8", ("lon",), endian="big")
    temp = nc.createVariable("temp", "f4", ("time", "lat", "lon"), fill_value=np.float32(-999.0),
                             compression="zlib", complevel=4, shuffle=True, chunksizes=(2, 3, 2))
    temp.units = "degC"
    pres = nc.createVariable("pres", "i2", ("time",), fill_value=np.int16(-32767), zlib=True, fletcher32=True)
    pres.scale_factor = np.float32(0.1)
    pres.add_offset = np.float32(1000.0)
    land = nc.createVariable("land", "i1", ("lat", "lon"), contiguous=True)
    land._Unsigned = "true"
    station = nc.createVariable("station", "S1", ("lat", "name_len"))
    station._Encoding = "utf-8"
    crs = nc.createVariable("crs", "i4", ())
    crs.grid_mapping_name = "latitude_longitude"
    counts = nc.createVariable("counts", "u8", ("lat", "lon"), compression="zstd", complevel=3)
    big = nc.createVariable("big", "i8", ("lat",), endian="big", compression="bzip2")
    sparse = nc.createVariable("sparse", "f8", ("cell",), chunksizes=(2,))
    sparse_filled = nc.createVariable("sparse_filled", "i4", ("cell",), chunksizes=(3,), fill_value=np.int32(-1), compression="zlib")
    nc.set_auto_maskandscale(False)
    t[:] = np.array([0.0, 6.0, 12.5, 18.0, 24.0])
    lat[:] = np.array([-10.0, 0.0, 10.5], dtype="f4")
    lon[:] = np.array([100.0, 101.25, 102.5, 103.75])
    values = (np.arange(5 * 3 * 4, dtype="f4").reshape(5, 3, 4) * 0.5 - 3).astype("f4")
    values[2, 1, 3] = -999.0
    temp[:] = values
    pres[:] = np.array([13, -25, -32767, 7, 32000], dtype="i2")
    land[:] = np.array([[0, 1, -1, -128], [5, 127, -2, 3], [0, 0, 0, -56]], dtype="i1")
    chars = np.zeros((3, 5), dtype="S1")
    for i, n in enumerate(["north", "mid", "sü"]):
        b = n.encode("utf-8")
        chars[i, : len(b)] = [bytes([c]) for c in b]
    station[:] = chars
    crs.assignValue(4326)
    counts[:] = (np.arange(12, dtype="u8").reshape(3, 4) * 2**60 // 7)
    big[:] = np.array([-(2**62), 0, 2**62 + 3], dtype="i8")
    sparse[0:2] = [1.5, 2.5]
    sparse[6:8] = [6.5, 7.5]
    sparse_filled[3:6] = [30, -1, 50]
record("nc4", path)

# nc4_classic.nc: NETCDF4_CLASSIC (the classic model in HDF5: `_nc3_strict`), two unlimited
# dimensions would not be classic, so one; a variable shorter than its unlimited dimension.
path = fresh("nc4_classic.nc")
with netCDF4.Dataset(path, "w", format="NETCDF4_CLASSIC") as nc:
    nc.source = "nc4 classic"
    nc.createDimension("time", None)
    nc.createDimension("probe", 3)
    t = nc.createVariable("time", "i4", ("time",))
    t.units = "days since 2000-02-27"
    t.calendar = "noleap"
    level = nc.createVariable("level", "i2", ("time", "probe"), zlib=True)
    level.scale_factor = 0.01
    level.add_offset = 20.0
    level.missing_value = np.int16(-1)
    nc.set_auto_maskandscale(False)
    t[:] = np.array([0, 1, 2, 3], dtype="i4")
    level[:] = np.array([[100, 200, -1], [0, 1, 2], [-300, 32767, -32768], [5, -1, 7]], dtype="i2")
record("nc4_classic", path)

# h5netcdf.nc: written by h5netcdf 1.8.2 through h5py 3.16 (HDF5 2.0, its default format:
# B-tree v1 chunk indexes), gzip and shuffle, blosc, a dimension without a coordinate
# variable.
import h5netcdf  # noqa: E402
import h5py  # noqa: E402

assert h5netcdf.__version__ == "1.8.2", h5netcdf.__version__
path = fresh("h5netcdf.nc")
with h5netcdf.File(path, "w") as f:
    f.attrs["conventions"] = "CF-1.8"
    f.dimensions = {"x": 6, "y": 4, "sample": 3}
    x = f.create_variable("x", ("x",), "f8")
    x[:] = np.arange(6) * 1.5
    v = f.create_variable("v", ("x", "y"), "f4", chunks=(4, 2), compression="gzip", shuffle=True,
                          fillvalue=np.float32(np.nan))
    v.attrs["long_name"] = "a value"
    data = np.arange(24, dtype="f4").reshape(6, 4) / 4
    data[1, 2] = np.nan
    v[:] = data
    s = f.create_variable("s", ("sample",), "i2")
    s[:] = [3, -4, 5]
    # Filters netCDF-C cannot write here, through hdf5plugin: blosc (lz4, byte shuffle).
    b = f.create_variable("blosc", ("x", "sample"), "u2", chunks=(3, 3),
                          **hdf5plugin.Blosc(cname="lz4", clevel=5, shuffle=hdf5plugin.Blosc.SHUFFLE))
    b[:] = np.arange(18, dtype="u2").reshape(6, 3) * 3001
    # lz4 (32004) in blocks of 16 bytes: runs that compress and noise that is stored as is.
    lz = f.create_variable("lz4", ("x", "y"), "i4", chunks=(3, 4), **hdf5plugin.LZ4(nbytes=16))
    noise = np.random.default_rng(7).integers(-2**31, 2**31 - 1, size=(6, 4), dtype="i4")
    lz[:] = np.where(np.arange(6)[:, None] < 3, 5, noise).astype("i4")
record("h5netcdf", path)

# indexes.nc: HDF5's newer chunk indexes (h5netcdf with libver="latest": layout messages of
# version 4): single chunk (filtered), fixed array, extensible array (one unlimited
# dimension), v2 B-tree (two), and implicit (early allocation, written with h5py's low-level
# API, dimension scales attached as h5netcdf does).
path = fresh("indexes.nc")
with h5netcdf.File(path, "w", libver="latest") as f:
    f.dimensions = {"x": 6, "y": 4, "t": None, "u": None}
    x = f.create_variable("x", ("x",), "f8")
    x[:] = np.arange(6) * 0.5
    single = f.create_variable("single", ("x", "y"), "i4", chunks=(6, 4), compression="gzip")
    single[:] = np.arange(24).reshape(6, 4)
    fixed = f.create_variable("fixed", ("x", "y"), "i4", chunks=(2, 2))
    fixed[:] = np.arange(24).reshape(6, 4) * 2
    f.resize_dimension("t", 5)
    ext = f.create_variable("ext", ("t", "y"), "f4", chunks=(2, 4), compression="gzip")
    ext[:] = np.arange(20, dtype="f4").reshape(5, 4)
    f.resize_dimension("u", 3)
    bt2 = f.create_variable("bt2", ("t", "u"), "i2", chunks=(2, 2))
    bt2[:] = np.arange(15, dtype="i2").reshape(5, 3)
with h5py.File(path, "a") as f:
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk((3, 2))
    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
    h5py.h5d.create(f.id, b"implicit", h5py.h5t.STD_I32LE, h5py.h5s.create_simple((6, 4)), dcpl=dcpl)
    implicit = f["implicit"]
    implicit[:] = np.arange(24, dtype="i4").reshape(6, 4) * 3
    implicit.dims[0].attach_scale(f["x"])
    implicit.dims[1].attach_scale(f["y"])
record("indexes", path)

# groups.nc: netCDF-4 groups (the `path` option): the root's `time`, a group `obs` whose
# variables use the root's dimension and its own, and a group inside it. xarray reads one
# group at a time (`group=`), the root's coordinate variables not among them.
path = fresh("groups.nc")
with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
    nc.title = "root"
    nc.createDimension("time", 3)
    t = nc.createVariable("time", "i4", ("time",))
    t.units = "days since 2001-01-01"
    t[:] = [0, 1, 2]
    obs = nc.createGroup("obs")
    obs.platform = "buoy"
    obs.createDimension("station", 2)
    st = obs.createVariable("station", "i2", ("station",))
    st[:] = [7, 9]
    temp = obs.createVariable("temp", "f4", ("time", "station"), zlib=True, chunksizes=(2, 1))
    temp[:] = np.arange(6, dtype="f4").reshape(3, 2) + 0.5
    deep = obs.createGroup("deep")
    deep.level = np.int32(3)
    x = deep.createVariable("x", "f8", ("station",))
    x[:] = [1.25, -2.5]
record("groups/obs", path, group="obs")
record("groups/obs/deep", path, group="/obs/deep")

# strings.nc: NC_STRING variables (variable-length strings in HDF5's global heap): a
# coordinate of station names (one of them empty, one not ASCII), a 2-D variable chunked and
# compressed, a scalar; beside a number.
path = fresh("strings.nc")
with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
    nc.createDimension("station", 3)
    nc.createDimension("obs", 2)
    st = nc.createVariable("station", str, ("station",))
    st[:] = np.array(["north", "", "süd-ost"], dtype=object)
    label = nc.createVariable("label", str, ("station", "obs"), zlib=True, chunksizes=(2, 1))
    label[:] = np.array([["a", "bb"], ["ccc", "dddd"], ["long label " * 3, "x"]], dtype=object)
    label.long_name = "labels"
    note = nc.createVariable("note", str, ())
    note[()] = "a scalar string"
    temp = nc.createVariable("temp", "f4", ("station", "obs"))
    temp[:] = np.arange(6, dtype="f4").reshape(3, 2)
record("strings", path)

# ranges.nc: a chunked netCDF-4 file large enough that a 1% time range is a small part of
# it (200 times of 128 x 64 int16, packed, deflate + shuffle, chunks of 2 times: 100
# chunks): the object-store test counts the bytes a 1% range fetches, metadata included.
path = fresh("ranges.nc")
with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
    nc.createDimension("time", None)
    nc.createDimension("y", 128)
    nc.createDimension("x", 64)
    t = nc.createVariable("time", "i4", ("time",))
    t.units = "hours since 2000-01-01"
    t[:] = np.arange(200, dtype="i4") * 6
    v = nc.createVariable(
        "t2m", "i2", ("time", "y", "x"), zlib=True, complevel=1, shuffle=True,
        chunksizes=(2, 128, 64),
    )
    v.scale_factor = 0.01
    v.add_offset = 270.0
    rng = np.random.default_rng(39)
    v.set_auto_maskandscale(False)
    v[:] = rng.integers(-3000, 3000, size=(200, 128, 64), dtype="i2")
with xr.open_dataset(path) as ds:
    one_percent = ds.t2m.isel(time=slice(100, 102))
    EXPECTED["ranges"] = {
        "file_bytes": path.stat().st_size,
        "one_percent": {
            "from": str(ds.time.values[100]),
            "to": str(ds.time.values[102]),
            "count": int(one_percent.count()),
            "sum": repr(float(one_percent.astype("f8").sum())),
        },
    }

# szip.nc: the szip filter (libaec in netCDF4-python's wheel), nearest-neighbour and
# entropy coding, 16- and 32-bit samples, a 2-D float variable in several chunks.
path = fresh("szip.nc")
with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
    nc.createDimension("t", 40)
    nc.createDimension("x", 33)
    t = nc.createVariable(
        "t", "i4", ("t",), compression="szip", szip_coding="ec", szip_pixels_per_block=8,
        chunksizes=(16,),
    )
    t[:] = np.arange(40, dtype="i4") * 3 - 7
    v = nc.createVariable(
        "v", "f4", ("t", "x"), compression="szip", szip_coding="nn", szip_pixels_per_block=16,
        chunksizes=(16, 33),
    )
    v[:] = (np.sin(np.arange(40 * 33, dtype="f4") / 10) * 100).reshape(40, 33)
    c = nc.createVariable(
        "count", "i2", ("t",), compression="szip", szip_coding="nn", szip_pixels_per_block=32
    )
    c[:] = (np.arange(40) ** 2 % 1000).astype("i2")
record("szip", path)

# enum.nc: netCDF-4 enum variables (xarray reads their base integers, masked by their
# _FillValue), beside a number.
path = fresh("enum.nc")
with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
    cloud_t = nc.createEnumType(
        np.uint8, "cloud_t", {"clear": 0, "cumulus": 1, "stratus": 2, "missing": 255}
    )
    level_t = nc.createEnumType(np.int16, "level_t", {"low": -1, "mid": 0, "high": 1})
    nc.createDimension("t", 5)
    cloud = nc.createVariable("cloud", cloud_t, ("t",), fill_value=255)
    cloud[:] = np.array([0, 2, 1, 255, 2], dtype="u1")
    level = nc.createVariable("level", level_t, ("t",), zlib=True, chunksizes=(2,))
    level[:] = np.array([-1, 0, 1, 1, -1], dtype="i2")
    temp = nc.createVariable("temp", "f4", ("t",))
    temp[:] = np.arange(5, dtype="f4") / 2
record("enum", path)

# bounds.nc: CMIP-style cell bounds. `time` (noleap) names `time_bnds`, which has no units
# of its own: xarray decodes it with the coordinate's units and calendar. `reftime`
# (360_day) names `reftime_bnds`, which has units of its own and no calendar: it keeps its
# units and takes the calendar. `lat_bnds` follows `lat`, whose units are not times: numbers.
path = fresh("bounds.nc")
with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
    nc.createDimension("time", None)
    nc.createDimension("bnds", 2)
    nc.createDimension("lat", 3)
    nc.createDimension("reftime", 2)
    t = nc.createVariable("time", "f8", ("time",))
    t.units = "days since 1850-01-01"
    t.calendar = "noleap"
    t.bounds = "time_bnds"
    t[:] = np.arange(5) * 365 + 182.5
    tb = nc.createVariable("time_bnds", "f8", ("time", "bnds"))
    tb[:] = np.stack([np.arange(5) * 365, np.arange(1, 6) * 365], axis=1)
    lat = nc.createVariable("lat", "f4", ("lat",))
    lat.units = "degrees_north"
    lat.bounds = "lat_bnds"
    lat[:] = [-30, 0, 30]
    nc.createVariable("lat_bnds", "f4", ("lat", "bnds"))[:] = [[-45, -15], [-15, 15], [15, 45]]
    r = nc.createVariable("reftime", "i4", ("reftime",))
    r.units = "days since 1900-01-01"
    r.calendar = "360_day"
    r.bounds = "reftime_bnds"
    r[:] = [15, 45]
    rb = nc.createVariable("reftime_bnds", "i4", ("reftime", "bnds"))
    rb.units = "hours since 1900-01-01"
    rb[:] = [[0, 720], [720, 1440]]
    tas = nc.createVariable("tas", "f4", ("time", "lat"))
    tas.units = "K"
    tas[:] = (np.arange(15, dtype="f4") / 4 + 280).reshape(5, 3)
record("bounds", path)

def cell(v):
    """One cell of xarray's dataframe as JSON (records as objects, subarrays as lists)."""
    if isinstance(v, np.void) and v.dtype.names:
        return {name: cell(v[name]) for name in v.dtype.names}
    if isinstance(v, np.ndarray):
        return [cell(x) for x in v]
    if isinstance(v, (bytes, np.bytes_)):
        return bytes(v).hex()
    if isinstance(v, np.datetime64):
        return int(v.astype("datetime64[ns]").astype("i8"))
    if isinstance(v, (np.floating, float)):
        return repr(float(v))
    if isinstance(v, (np.integer, int)):
        return int(v)
    raise TypeError(f"no JSON for {v!r} ({type(v)})")


def record_rows(name, path):
    """What xarray shows, as `rows` of objects (for records and arrays in cells)."""
    with xr.open_dataset(path) as ds:
        df = ds.to_dataframe().reset_index()
        EXPECTED[name] = {
            "columns": list(df.columns),
            "dtypes": {c: str(df[c].dtype) for c in df.columns},
            "rows": [{c: cell(df[c].to_numpy()[r]) for c in df.columns} for r in range(len(df))],
            "attrs": {k: attr(v) for k, v in ds.attrs.items()},
        }


# compound.nc: a netCDF-4 compound variable (netCDF4-python's records: an integer, an array
# member, a nested compound, a character array member; C's alignment leaves gaps between
# members), chunked and deflated, its last time slab never written; beside a float variable.
# xarray shows the variable as one column of records: expected.json has its rows as objects.
# (netCDF4-python 1.7.5 stores only the first character of each name: h5py reads the same.)
path = fresh("compound.nc")
with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
    nc.title = "compound records"
    inner = np.dtype([("level", "<i2"), ("flag", "u1")], align=True)
    outer = np.dtype(
        [("id", "<i4"), ("pos", "<f8", (2,)), ("meta", inner), ("name", "S1", (4,))], align=True
    )
    nc.createCompoundType(inner, "inner_t")
    outer_t = nc.createCompoundType(outer, "outer_t")
    nc.createDimension("time", 4)
    nc.createDimension("s", 2)
    t = nc.createVariable("time", "f8", ("time",))
    t.units = "days since 2000-01-01"
    t[:] = [0, 1, 2, 3]
    obs = nc.createVariable("obs", outer_t, ("time", "s"), chunksizes=(1, 2), zlib=True)
    obs.long_name = "observations"
    data = np.zeros((3, 2), outer)
    data["id"] = np.arange(6).reshape(3, 2) * 10 - 3
    data["pos"] = np.arange(12).reshape(3, 2, 2) / 4 - 1
    data["meta"]["level"] = np.arange(6).reshape(3, 2) - 4
    data["meta"]["flag"] = 255 - np.arange(6).reshape(3, 2)
    for i in range(3):
        for j in range(2):
            name = (b"st%d" % i)[: 2 + j].ljust(4, b"\0")
            data["name"][i, j] = np.frombuffer(name, "S1")
    obs[:3] = data
    temp = nc.createVariable("temp", "f4", ("time",))
    temp[:] = np.arange(4, dtype="f4") / 2


record_rows("compound", path)

# vlen.nc: variable-length (vlen) variables, which xarray shows as arrays of numbers: int16
# lists (one empty) over a coordinate, float64 lists over two dimensions (chunked, deflated,
# most elements never written: empty), beside a number. expected.json has the rows.
path = fresh("vlen.nc")
with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
    nc.createDimension("x", 3)
    nc.createDimension("y", 2)
    x = nc.createVariable("x", "i4", ("x",))
    x[:] = [10, 20, 30]
    ragged_t = nc.createVLType(np.int16, "ragged_t")
    ragged = nc.createVariable("ragged", ragged_t, ("x",))
    ragged.long_name = "ragged counts"
    for i, n in enumerate([2, 0, 3]):
        ragged[i] = (np.arange(n) * 100 - 150).astype("i2")
    waves_t = nc.createVLType(np.float64, "waves_t")
    waves = nc.createVariable("waves", waves_t, ("x", "y"), zlib=True, chunksizes=(2, 2))
    waves[0, 0] = np.array([1.5, 2.5])
    waves[2, 1] = np.array([-1.0, 1e-300, np.inf])
    plain = nc.createVariable("plain", "i4", ("x",))
    plain[:] = [5, 6, 7]
record_rows("vlen", path)

# skipped.nc: variables of types netCDF4-python does not read, which it (and so xarray's
# default engine) leaves out with a warning or silently: an opaque type, a vlen of compound
# values, compounds with an enum (h5py's bool), an opaque or a vlen member (h5py 3.16 adds
# them to a netCDF4-python file: netCDF4-python cannot write them). expected.json has what
# xarray shows: the coordinate and `plain`. ndfusion leaves them out too unless `variables`
# names one; `flags` (h5py: ok [True, False, True], code [0, 7, 7]) it reads when named.
path = fresh("skipped.nc")
with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
    nc.createDimension("x", 3)
    nc.createVariable("x", "i4", ("x",))[:] = [10, 20, 30]
    nc.createVariable("plain", "i4", ("x",))[:] = [5, 6, 7]
with h5py.File(path, "a") as f:
    def beside_plain(name, data):
        f.create_dataset(name, data=data).dims[0].attach_scale(f["x"])

    pair = np.dtype([("a", "<i4"), ("b", "<f8")])
    pairs = np.empty(3, dtype=h5py.vlen_dtype(pair))
    pairs[:] = [np.array([(1, 0.5)], pair), np.array([], pair), np.array([(2, 1.5)] * 2, pair)]
    beside_plain("pairs", pairs)
    beside_plain("blob", np.array([b"ab\0c", b"defg", b"hijk"], dtype="V4"))
    code_t = h5py.enum_dtype({"LOW": 0, "HIGH": 7}, basetype="i1")
    flags = np.zeros(3, dtype=[("ok", "?"), ("code", code_t)])
    flags["ok"] = [True, False, True]
    flags["code"] = [0, 7, 7]
    beside_plain("flags", flags)
    beside_plain("tagged", np.zeros(3, dtype=[("n", "<i2"), ("tag", "V2")]))
    ragged = np.empty(3, dtype=[("n", "<i2"), ("l", h5py.vlen_dtype("<i2"))])
    ragged["n"] = [1, 2, 3]
    for i, n in enumerate([1, 0, 2]):
        ragged["l"][i] = np.arange(n, dtype="<i2")
    beside_plain("ragged", ragged)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # netCDF4-python's "unsupported datatype, skipping"
    record("skipped", path)

# user_block.nc: a netCDF-4 file (h5netcdf) whose HDF5 superblock follows a 1 KiB user
# block holding text. xarray does not guess its engine: read with h5netcdf's.
path = fresh("user_block.nc")
with h5netcdf.File(path, "w", userblock_size=1024) as f:
    f.attrs["title"] = "after a user block"
    f.dimensions = {"x": 3}
    x = f.create_variable("x", ("x",), "i4")
    x[:] = [10, 20, 30]
    v = f.create_variable("v", ("x",), "f4", chunks=(2,), compression="gzip")
    v[:] = [1.5, -2.0, 3.25]
with open(path, "r+b") as f:
    f.write(b"a user block: anything an application keeps before the HDF5 data")
record("user_block", path, engine="h5netcdf")

# bitshuffle.nc: a filter ndfusion does not decode (bitshuffle, 32008): opening it is an
# error naming the variable and the filter, unless the table's `variables` leave it out
# (`plain` is 0, 10, ..., 70).
path = fresh("bitshuffle.nc")
with h5netcdf.File(path, "w") as f:
    f.dimensions = {"x": 8}
    v = f.create_variable("packed", ("x",), "i4", chunks=(4,), **hdf5plugin.Bitshuffle())
    v[:] = np.arange(8, dtype="i4")
    p = f.create_variable("plain", ("x",), "i2")
    p[:] = np.arange(8, dtype="i2") * 10

# ---------------------------------------------------------------- shipped
shipped = HERE / "shipped"
shutil.rmtree(shipped, ignore_errors=True)
shipped.mkdir()
for package, files in [(xr, ["example_1.nc", "bears.nc"]), (scipy.io, ["example_1.nc", "example_2.nc", "example_3_maskedvals.nc"])]:
    data = Path(package.__file__).resolve().parent / "tests" / "data"
    prefix = "xarray" if package is xr else "scipy"
    for f in files:
        target = shipped / f"{prefix}_{f}"
        shutil.copyfile(data / f, target)
        record(f"shipped/{target.name}", target)

(HERE / "expected.json").write_text(json.dumps(EXPECTED, indent=1, sort_keys=True) + "\n")
print("wrote", sorted(EXPECTED))
