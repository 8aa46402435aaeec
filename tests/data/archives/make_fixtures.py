"""Writes the "real archive" fixtures of ndfusion's tests: the CF conventions that archives use
(`_Unsigned`, time units as archives spell them, `missing_value` lists, fill values on byte and
string variables, non-standard calendars, coordinate-only dimensions, `coordinates` attributes)
and the netCDF files that ship with scipy and xarray, converted by `xarray.to_zarr` (Zarr v2 and
v3). Written with xarray 2026.9.0, zarr-python 3.4.2 and cftime.

Run from the repository root:

    PYENV_VERSION=3.12.1 python3.12 -m pip install xarray==2026.9.0 zarr==3.4.2 pandas==3.1.1 \
        cftime==1.6.6.1 scipy==1.18.1
    PYENV_VERSION=3.12.1 python3.12 tests/data/archives/make_fixtures.py

Besides the stores it writes `expected.json`: for every dataset (these and the ones under
tests/data/datasets), what `xr.open_zarr(path).to_dataframe().reset_index()` gives: the columns,
the row count, every column's values (floats as `repr` strings, NaN as null, times as integer
nanoseconds since 1970 of their date labels, bytes as hex, strings as they are) and per column
`count`, `sum`, `min` and `max` as pandas computes them (NaN counts as missing). Times of
non-standard calendars are cftime objects in xarray; their labels are written as the Gregorian
timestamp of the same label, which is how ndfusion shows them. `labels` holds the cftime labels
(`isoformat`) of `xr.open_zarr(path, use_cftime=True)` for the calendar fixture. Broken stores go
under `bad/`.
"""

import base64
import json
import shutil
import warnings
from pathlib import Path

import cftime
import numpy as np
import pandas as pd
import scipy
import xarray as xr
import zarr

assert xr.__version__ == "2026.9.0", xr.__version__
assert zarr.__version__ == "3.4.2", zarr.__version__
warnings.filterwarnings("ignore")

HERE = Path(__file__).resolve().parent
DATASETS = HERE.parent / "datasets"
EXPECTED = {}


def fresh(name):
    path = HERE / name
    if path.exists():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def label_ns(t):
    """The Gregorian timestamp (ns) of a cftime date's label."""
    return int(pd.Timestamp(t.year, t.month, t.day, t.hour, t.minute, t.second, t.microsecond).value)


def kind(values):
    non_null = [v for v in values if v is not None and not (isinstance(v, float) and np.isnan(v))]
    if np.issubdtype(values.dtype, np.datetime64):
        return "time"
    if values.dtype == object and non_null and isinstance(non_null[0], cftime.datetime):
        return "cftime"
    if values.dtype == bool:
        return "bool"
    if np.issubdtype(values.dtype, np.floating):
        return "float"
    if np.issubdtype(values.dtype, np.integer):
        return "int"
    if values.dtype.kind == "S" or (non_null and isinstance(non_null[0], bytes)):
        return "bytes"
    return "str"


def cell(v, k):
    if v is None or (k in ("float", "time", "bytes", "str", "cftime") and pd.isna(v)):
        return None
    if k == "time":
        return int(np.datetime64(v, "ns").astype("int64"))
    if k == "cftime":
        return label_ns(v)
    if k == "float":
        return repr(float(v))
    if k == "int":
        return int(v)
    if k == "bool":
        return bool(v)
    if k == "bytes":
        return bytes(v).hex()
    return str(v)


def summary(values, k):
    cells = [cell(v, k) for v in values]
    present = [c for c in cells if c is not None]
    out = {"count": len(present)}
    if not present:
        return out
    if k == "float":
        nums = np.array([float(c) for c in present])
        out["sum"] = repr(float(nums.sum()))
        out["min"] = repr(float(nums.min()))
        out["max"] = repr(float(nums.max()))
    elif k == "int":
        # Python integers: exact for uint64 values above 2^63.
        out["sum"] = repr(float(sum(present)))
        out["min"] = min(present)
        out["max"] = max(present)
    elif k != "bool":
        out["min"] = min(present)
        out["max"] = max(present)
    return out


def record(name, path, group=None):
    """What xarray reads from the store at `path` (its subgroup `group`) as dataset `name`."""
    ds = xr.open_zarr(path, group=group)
    df = ds.to_dataframe().reset_index()
    kinds = {c: kind(df[c].to_numpy()) for c in df.columns}
    location = path / group if group else path
    EXPECTED[name] = {
        "path": str(location.relative_to(HERE.parent.parent.parent)),
        "dims": list(ds.dims),
        "columns": list(df.columns),
        "kinds": kinds,
        "rows": len(df),
        "values": {c: [cell(v, kinds[c]) for v in df[c].to_numpy()] for c in df.columns},
        "summary": {c: summary(df[c].to_numpy(), kinds[c]) for c in df.columns},
    }
    return ds


def consolidate(path):
    zarr.consolidate_metadata(str(path))


# ------------------------------------------------- netCDF files that ship with scipy and xarray
SITE = Path(xr.__file__).parent.parent
SHIPPED = {
    # time `hours since 1996-1-1` (unpadded) on int16, `valid_range` (not applied by xarray).
    "example_1": (SITE / "xarray/tests/data/example_1.nc", [], []),
    # A char variable over its own dimension (joined into strings), a coordinate-only dimension.
    "bears": (SITE / "xarray/tests/data/bears.nc", [], []),
    # _FillValue / missing_value on floats, ints and a char variable (v2: the Zarr fill value).
    # xarray cannot write var3 (two fill values), nor read a |S1 _FillValue back from v3.
    "maskedvals": (
        SITE / "scipy/io/tests/data/example_3_maskedvals.nc",
        ["var3_fillvalAndMissingValue"],
        ["var6_char"],
    ),
    # A dataset of one packed coordinate (float32 scale_factor, int add_offset, missing_value).
    "example_2": (SITE / "scipy/io/tests/data/example_2.nc", [], []),
}
for name, (nc, drop, drop_v3) in SHIPPED.items():
    for fmt in (2, 3):
        source = xr.open_dataset(nc).drop_vars(drop + (drop_v3 if fmt == 3 else []))
        path = fresh(f"{name}_v{fmt}.zarr")
        source.to_zarr(path, zarr_format=fmt, consolidated=True)
        record(f"{name}_v{fmt}", path)

# ------------------------------------------------- a packed reanalysis: _Unsigned, missing_value
# xarray's Zarr backend does not write `_Unsigned` (it is a netCDF attribute): stores that carry
# it come from netCDF conversions that copy attributes. zarr-python writes the stored integers and
# the attributes here, as such a conversion leaves them (v2: the Zarr fill value is _FillValue).
rng = np.random.default_rng(11)
shape = (6, 4, 3)  # time x lat x lon
counts = rng.integers(0, 65535, size=shape).astype("uint16")
counts[0, 0, 0] = 65535  # the fill value, stored as -1
counts[1, 2, 1] = 40000
quality = rng.integers(0, 255, size=shape).astype("uint8")
quality[2, 1, 1] = 255  # the fill value, stored as -1
for fmt in (2, 3):
    path = fresh(f"packed_v{fmt}.zarr")
    group = zarr.open_group(str(path), mode="w", zarr_format=fmt,
                            attributes={"title": "packed reanalysis", "Conventions": "CF-1.8"})

    def add(name, stored, dims, attrs, fill=None, chunks=None):
        """`fill` is the stored _FillValue (v2: the Zarr fill value; v3: the attribute)."""
        attrs = dict(attrs)
        if fmt == 2:
            attrs["_ARRAY_DIMENSIONS"] = list(dims)
            kwargs = {"fill_value": None if fill is None else fill}
        else:
            kwargs = {"dimension_names": list(dims), "fill_value": 0}
            if fill is not None:
                attrs["_FillValue"] = fill
        a = group.create_array(name, shape=stored.shape, dtype=stored.dtype,
                               chunks=chunks or stored.shape, **kwargs)
        a[...] = stored
        a.attrs.update(attrs)

    add("time", np.arange(6, dtype="int32") * 6 + 692496, ["time"],
        {"units": "hours since 1900-01-01 00:00:0.0", "calendar": "gregorian"})
    add("lat", np.array([60.0, 30.0, 0.0, -30.0]), ["lat"], {"units": "degrees_north"})
    add("lon", np.array([0.0, 90.0, 180.0], dtype="float32"), ["lon"], {"units": "degrees_east"})
    # Unsigned 16-bit counts in int16 with scale and offset (values above 32767 included).
    add("tb", counts.view("int16"), ["time", "lat", "lon"],
        {"_Unsigned": "true", "scale_factor": 0.005, "add_offset": 150.0}, fill=-1, chunks=(2, 4, 3))
    # Unsigned 8-bit flags in int8 with a fill value, no scale.
    add("quality", quality.view("int8"), ["time", "lat", "lon"], {"_Unsigned": "true"}, fill=-1,
        chunks=(3, 2, 3))
    # Unsigned without fill or scale: uint32 / uint64 values.
    add("pixels", rng.integers(2**31, 2**32 - 1, size=(4, 3)).astype("uint32").view("int32"),
        ["lat", "lon"], {"_Unsigned": "true"})
    add("ticks", np.array([2**63 + 5, 7, 2**64 - 2, 0, 1, 2**62], dtype="uint64").view("int64"),
        ["time"], {"_Unsigned": "true"})
    # _Unsigned "false" on an unsigned array: signed values, the fill read as signed too.
    add("anomaly", np.array([[65535, 1, 32768], [2, 65534, 100], [0, 3, 40000], [7, 8, 9]],
                            dtype="uint16"), ["lat", "lon"], {"_Unsigned": "false"}, fill=100)
    # A missing_value list (two sentinels) on int32, and a valid_range xarray does not apply.
    add("level", np.array([10, -999, 30, -998, 50, 60], dtype="int32"), ["time"],
        {"missing_value": [-999, -998], "valid_range": [0, 40]})
    consolidate(path)
    record(f"packed_v{fmt}", path)

# ------------------------------------------------- times as archives spell their units
obs = np.arange(4)
spellings = {
    "t_argo": ("days since 1950-01-01 00:00:00 UTC", np.array([0, 1, 20000, 27000], dtype="int64")),
    "t_zulu": ("hours since 2000-01-01T00:00:00Z", np.array([0, 6, 12, 18], dtype="int32")),
    "t_offset": ("hours since 1970-01-01 00:00:00 +01:00", np.array([0, 1, 2, 3], dtype="int64")),
    "t_offset_t": ("minutes since 2000-01-01T06:00:00-05:30", np.array([0, 30, 60, 90], dtype="int16")),
    "t_unpadded": ("days since 2000-1-1 0:0:0", np.array([0, 31, 60, 366], dtype="int32")),
    "t_fraction": ("days since 2000-01-01", np.array([0.25, 1.5, 2.75, 10.125], dtype="float64")),
    "t_float32": ("hours since 2010-06-01 12:00", np.array([0.5, 1.0, 1.5, 48.25], dtype="float32")),
    "t_seconds": ("seconds since 1900-01-01 00:00:0.0", np.array([0, 3.6e9, 3.7e9, 4e9], dtype="float64")),
    "t_gmt": ("seconds since 1970-01-01 00:00:00 GMT", np.array([0, 86400, 1e9, 1.7e9], dtype="float64")),
    "t_hour_only": ("days since 2000-01-01 12", np.array([0, 1, 2, 3], dtype="int8")),
    "t_nan": ("days since 2020-02-28", np.array([0.0, np.nan, 1.0, 2.0], dtype="float64")),
}
for fmt in (2, 3):
    path = fresh(f"time_units_v{fmt}.zarr")
    group = zarr.open_group(str(path), mode="w", zarr_format=fmt, attributes={"title": "time units"})
    dims = {"_ARRAY_DIMENSIONS": ["obs"]} if fmt == 2 else {}
    kwargs = {} if fmt == 2 else {"dimension_names": ["obs"]}
    v = group.create_array("value", shape=(4,), dtype="float64", fill_value=None if fmt == 2 else 0.0, **kwargs)
    v[...] = obs * 1.5
    v.attrs.update({"coordinates": " ".join(spellings), **dims})
    for name, (units, values) in spellings.items():
        a = group.create_array(name, shape=(4,), dtype=values.dtype, fill_value=None if fmt == 2 else 0, **kwargs)
        a[...] = values
        a.attrs.update({"units": units, **dims})
    consolidate(path)
    record(f"time_units_v{fmt}", path)

# ------------------------------------------------- non-standard calendars (CMIP)
# time is `noleap` (every CMIP model run); the other calendars are non-dimension coordinates
# whose labels are all valid Gregorian dates.
calendars = {
    # 59 days after 2000-01-01 is 2000-03-01 in noleap (2000-02-29 in Gregorian).
    "time": ("noleap", "days since 2000-01-01", np.array([0, 31, 59, 365, 424, 730], dtype="int64")),
    "t_365": ("365_day", "days since 1850-01-01 00:00:00", np.array([0.5, 59.5, 365.0, 400.25, 1000, 73000], dtype="float64")),
    "t_360": ("360_day", "days since 2000-01-01", np.array([0, 45, 75, 360, 389, 719], dtype="int32")),
    "t_all_leap": ("all_leap", "days since 2001-01-01", np.array([0, 31, 60, 366, 400, 800], dtype="int64")),
    "t_366": ("366_day", "hours since 2001-01-01", np.array([0, 24 * 60, 24 * 366, 24 * 800, 5, 6], dtype="int64")),
    "t_julian": ("julian", "days since 2000-01-01", np.array([0, 1, 60, 366, 1000, 3650], dtype="int64")),
}
for fmt in (2, 3):
    path = fresh(f"calendars_v{fmt}.zarr")
    group = zarr.open_group(str(path), mode="w", zarr_format=fmt, attributes={"experiment_id": "historical"})
    dims = {"_ARRAY_DIMENSIONS": ["time"]} if fmt == 2 else {}
    kwargs = {} if fmt == 2 else {"dimension_names": ["time"]}
    tas = group.create_array("tas", shape=(6,), chunks=(2,), dtype="float32", fill_value=None if fmt == 2 else 0.0, **kwargs)
    tas[...] = np.array([271.5, 272.25, 280.0, 290.5, 285.0, 275.125], dtype="float32")
    tas.attrs.update({"coordinates": " ".join(k for k in calendars if k != "time"), **dims})
    for name, (calendar, units, values) in calendars.items():
        a = group.create_array(name, shape=(6,), chunks=(2,), dtype=values.dtype, fill_value=None if fmt == 2 else 0, **kwargs)
        a[...] = values
        a.attrs.update({"units": units, "calendar": calendar, **dims})
    consolidate(path)
    record(f"calendars_v{fmt}", path)
    labelled = xr.open_zarr(path, use_cftime=True)
    EXPECTED[f"calendars_v{fmt}"]["labels"] = {
        name: [t.isoformat() for t in labelled[name].values] for name in calendars
    }
    EXPECTED[f"calendars_v{fmt}"]["answers"] = {
        # tas where the noleap time label is on or after 2000-03-01 (the pushdown query).
        "sum_tas_from_march_2000": repr(float(labelled.tas.where(
            labelled.time >= cftime.DatetimeNoLeap(2000, 3, 1), drop=True).sum())),
    }

# ------------------------------------------------- coordinate-only dimensions, `coordinates`
# `l(l)` is used by no data variable; `band_id(band)` is named by a variable's `coordinates`
# attribute, `site_name(x)` by the group's; 2-D `lat(y, x)` / `lon(y, x)` as on curvilinear grids.
for fmt in (2, 3):
    path = fresh(f"coordinate_dims_v{fmt}.zarr")
    ds = xr.Dataset(
        {"radiance": (("y", "x"), np.arange(6, dtype="float32").reshape(2, 3) / 4)},
        coords={"l": ("l", np.array([100, 200], dtype="int16"))},
        attrs={"platform": "sat-1"},
    )
    ds.to_zarr(path, zarr_format=fmt, consolidated=False)
    group = zarr.open_group(str(path), mode="a")

    def add(name, values, dims, attrs=None, dtype=None):
        kwargs = {} if fmt == 2 else {"dimension_names": list(dims)}
        fill = None if fmt == 2 else (0 if values.dtype.kind in "iuf" else "")
        a = group.create_array(name, shape=values.shape, dtype=dtype or values.dtype, fill_value=fill,
                               **kwargs)
        a[...] = values
        a.attrs.update({**(attrs or {}), **({"_ARRAY_DIMENSIONS": list(dims)} if fmt == 2 else {})})

    add("band_id", np.array([3, 4, 5], dtype="int32"), ["band"])
    add("site_name", np.array(["west", "mid", "east"], dtype=object), ["x"], dtype=str)
    add("lat", np.array([[10.0, 10.5, 11.0], [12.0, 12.5, 13.0]]), ["y", "x"], {"units": "degrees_north"})
    add("lon", np.array([[-5.0, -4.0, -3.0], [-5.5, -4.5, -3.5]]), ["y", "x"], {"units": "degrees_east"})
    group["radiance"].attrs["coordinates"] = "lat lon band_id"
    group.attrs["coordinates"] = "site_name"
    consolidate(path)
    record(f"coordinate_dims_v{fmt}", path)

# ------------------------------------------------- station series: strings and bytes with fills
for fmt in (2, 3):
    path = fresh(f"stations_fill_v{fmt}.zarr")
    ds = xr.Dataset(
        {"temp": (("time", "station"), np.array([[1.5, 2.5, 3.5], [4.5, 5.5, 6.5]], dtype="float32"))},
        coords={
            "time": pd.date_range("2024-01-01", periods=2, freq="D"),
            "station": np.array(["s1", "s2", "s3"], dtype=object),
            "wmo": ("station", np.array([b"AB1", b"---", b"CD"], dtype="S3")),
            "status": ("station", np.array(["ok", "n/a", "bad"], dtype=object)),
        },
    )
    encoding = {"temp": {"_FillValue": np.float32(6.5)}}
    if fmt == 2:
        # Fixed-width bytes masked by the Zarr fill value, as converted netCDF char data is.
        encoding["wmo"] = {"_FillValue": b"---"}
    ds.to_zarr(path, zarr_format=fmt, consolidated=False, encoding=encoding)
    if fmt == 2:
        # A vlen string masked by the Zarr fill value (xarray cannot read a _FillValue attribute
        # on a v3 string array back).
        group = zarr.open_group(str(path), mode="a")
        status = group["status"]
        meta = json.loads((path / "status" / ".zarray").read_text())
        meta["fill_value"] = "n/a"
        (path / "status" / ".zarray").write_text(json.dumps(meta, indent=4))
    consolidate(path)
    record(f"stations_fill_v{fmt}", path)

# ------------------------------------------------- a store grown by appends along time
for fmt in (2, 3):
    path = fresh(f"appended_v{fmt}.zarr")
    days = pd.date_range("2020-01-01", periods=7, freq="D")
    sst = (15 + np.arange(7 * 2 * 3).reshape(7, 2, 3) / 8).astype("float32")
    sst[5, 1, 2] = np.nan
    whole = xr.Dataset({"sst": (("time", "lat", "lon"), sst)},
                       coords={"time": days, "lat": [10.0, 20.0], "lon": [100.0, 110.0, 120.0]})
    encoding = {"sst": {"chunks": (3, 2, 3)}, "time": {"units": "days since 2020-01-01", "chunks": (3,)}}
    whole.isel(time=slice(0, 3)).to_zarr(path, zarr_format=fmt, consolidated=True, encoding=encoding)
    # Two appends: chunks of 3 along time, the last one partial.
    whole.isel(time=slice(3, 5)).to_zarr(path, consolidated=True, append_dim="time")
    whole.isel(time=slice(5, 7)).to_zarr(path, consolidated=True, append_dim="time")
    record(f"appended_v{fmt}", path)

# ------------------------------------------------- model runs in subgroups, curvilinear grids
for fmt in (2, 3):
    path = fresh(f"runs_v{fmt}.zarr")
    yy, xx = np.meshgrid(np.arange(3), np.arange(4), indexing="ij")
    for run, bias in (("run1", 0.0), ("run2", 0.5)):
        ds = xr.Dataset(
            {"zeta": (("y", "x"), (yy * 4 + xx) / 10 + bias, {"coordinates": "lat_rho lon_rho"})},
            coords={"lat_rho": (("y", "x"), 40 + yy * 0.5 + xx * 0.1),
                    "lon_rho": (("y", "x"), -70 + xx * 0.5 - yy * 0.1)},
            attrs={"run": run},
        )
        ds.to_zarr(path, group=run, zarr_format=fmt, consolidated=True, mode="a")
        record(f"runs_v{fmt}/{run}", path, group=run)

# ------------------------------------------------- the dataset fixtures of tests/data/datasets
for name in ("ocean_v2", "ocean_v3", "stations_v2", "stations_v3"):
    record(f"datasets/{name}", DATASETS / f"{name}.zarr")

# ------------------------------------------------- bad input
# A 360_day label that no Gregorian calendar has (2000-02-30).
path = fresh("bad/calendar_360_day.zarr")
bad = xr.Dataset({"v": (("time",), np.arange(3.0))},
                 coords={"time": ("time", np.array([0, 59, 60]), {"units": "days since 2000-01-01", "calendar": "360_day"})})
bad.to_zarr(path, zarr_format=3, consolidated=True)
EXPECTED["bad/calendar_360_day"] = {
    "labels": [t.isoformat() for t in xr.open_zarr(path, use_cftime=True).time.values],
}
# A calendar no CF convention names.
path = fresh("bad/calendar_unknown.zarr")
bad = xr.Dataset({"v": (("time",), np.arange(2.0))},
                 coords={"time": ("time", np.array([0, 1]), {"units": "days since 2000-01-01", "calendar": "lunar"})})
bad.to_zarr(path, zarr_format=3, consolidated=True)

# A member naming one dimension twice (v2 `_ARRAY_DIMENSIONS`, which nothing checks).
path = fresh("bad/repeated_dimension.zarr")
group = zarr.open_group(str(path), mode="w", zarr_format=2)
a = group.create_array("a", shape=(2, 2), dtype="float64", fill_value=None)
a[...] = np.arange(4.0).reshape(2, 2)
a.attrs["_ARRAY_DIMENSIONS"] = ["x", "x"]
consolidate(path)
# Two dimensions of 2^40 (metadata only): a grid of 2^80 cells.
path = fresh("bad/huge_grid.zarr")
group = zarr.open_group(str(path), mode="w", zarr_format=3)
group.create_array("a", shape=(2**40,), chunks=(2**20,), dtype="float32", dimension_names=["x"])
group.create_array("b", shape=(2**40,), chunks=(2**20,), dtype="float32", dimension_names=["y"])
consolidate(path)
# An array whose struct field is named like the column of its attributes, alone and as a
# collection member.
for name in ("a", "b"):
    path = fresh(f"bad/global_attrs_field/{name}.zarr")
    clash = np.dtype([("__global_attrs__", "<i4"), ("v", "<f4")])
    arr = zarr.create_array(str(path), shape=(2,), dtype=clash, zarr_format=3,
                            fill_value=np.zeros((), dtype=clash)[()], attributes={"id": name})
    arr[...] = np.array([(1, 0.5), (2, 1.5)], dtype=clash)
# A coordinate of 2^36 float64 values (metadata only): 512 GiB if read whole.
path = fresh("bad/huge_coordinate.zarr")
group = zarr.open_group(str(path), mode="w", zarr_format=3)
group.create_array("x", shape=(2**36,), chunks=(2**24,), dtype="float64", dimension_names=["x"])
group.create_array("v", shape=(2**36,), chunks=(2**24,), dtype="float32", dimension_names=["x"])
consolidate(path)
# A struct variable with a field named like the column of the group's attributes (a variable
# cannot be: Zarr v3 reserves names starting with "__").
path = fresh("bad/global_attrs_clash.zarr")
group = zarr.open_group(str(path), mode="w", zarr_format=3, attributes={"id": "clash"})
clash = np.dtype([("__global_attrs__", "<i4"), ("v", "<f4")])
v = group.create_array("rec", shape=(2,), dtype=clash, fill_value=np.zeros((), dtype=clash)[()],
                       dimension_names=["x"])
v[...] = np.array([(1, 0.5), (2, 1.5)], dtype=clash)
consolidate(path)

(HERE / "expected.json").write_text(json.dumps(EXPECTED, indent=1, sort_keys=True) + "\n")
print("wrote", ", ".join(sorted(EXPECTED)))
