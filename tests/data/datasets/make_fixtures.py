"""Writes the Zarr dataset fixtures of ndfusion's tests with xarray 2026.9.0 (zarr-python 3.4.2)
and zarr-python alone.

Run from the repository root:

    PYENV_VERSION=3.12.1 python3.12 -m pip install xarray==2026.9.0 zarr==3.4.2 pandas==3.1.1
    PYENV_VERSION=3.12.1 python3.12 tests/data/datasets/make_fixtures.py

Besides the groups it writes `expected.json`: for every fixture, the table
`xr.open_zarr(path).to_dataframe().reset_index()` gives (column -> values in its row order;
floats as `repr` strings, NaN as null, times as integer nanoseconds since 1970, strings as
they are), and the answers of the aggregates the SQL files assert, computed with xarray.
It also writes broken groups under `bad/` for the error tests.
"""

import json
import shutil
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
import zarr

assert xr.__version__ == "2026.9.0", xr.__version__
assert zarr.__version__ == "3.4.2", zarr.__version__
warnings.filterwarnings("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from fixture_common import dataframe_table  # noqa: E402

HERE = Path(__file__).resolve().parent
EXPECTED = {}


def fresh(name):
    path = HERE / name
    if path.exists():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def record(name, path, **open_kwargs):
    ds = xr.open_zarr(path, **open_kwargs)
    EXPECTED[name] = dataframe_table(ds)
    return ds


# ---------------------------------------------------------------- ocean: time x lat x lon
TIME = pd.date_range("2001-03-01", periods=24, freq="D")
LAT = np.array([25.0, 15.0, 5.0, -5.0, -15.0, -25.0])  # descending
LON = np.array([-30.0, -20.0, -10.0, 0.0, 10.0], dtype="float32")
rng = np.random.default_rng(7)
shape = (len(TIME), len(LAT), len(LON))
temp = (20 + 5 * np.cos(np.deg2rad(LAT))[None, :, None] + rng.normal(0, 1, shape)).astype("float32")
temp[3, 2, 1] = np.nan
temp[20, 0, 4] = np.nan
sal = 34 + rng.normal(0, 0.5, shape)
sal[5, 1, 2] = np.nan  # masked: stored as _FillValue
mask = (np.arange(len(LAT))[:, None] + np.arange(len(LON))[None, :]) % 3 == 0
tide = np.sin(np.arange(len(TIME)) / 3.0)
basin = np.array(["atlantic", "atlantic", "atlantic", "pacific", "pacific"])

ocean = xr.Dataset(
    {
        "temp": (("time", "lat", "lon"), temp, {"units": "degC", "long_name": "sea temperature"}),
        "sal": (("time", "lat", "lon"), sal, {"units": "psu"}),
        "land": (("lat", "lon"), mask.astype("uint8")),
        "tide": (("time",), tide),
    },
    coords={"time": TIME, "lat": LAT, "lon": LON, "basin": ("lon", basin)},
    attrs={"id": "ocean-a", "title": "a small ocean", "version": 3, "calibrated": True, "scale": 0.5},
)
encoding = {
    "time": {"units": "days since 2001-03-01 00:00:00", "calendar": "proleptic_gregorian", "dtype": "int64"},
    "temp": {"chunks": (8, 3, 5)},
    "sal": {"dtype": "int16", "scale_factor": 0.01, "add_offset": 30.0, "_FillValue": -32768, "chunks": (8, 3, 5)},
    "land": {"chunks": (3, 5)},
}
for fmt in (3, 2):
    path = fresh(f"ocean_v{fmt}.zarr")
    enc = {k: dict(v) for k, v in encoding.items()}
    ocean.to_zarr(path, zarr_format=fmt, encoding=enc, consolidated=True)
    ds = record(f"ocean_v{fmt}", path)
    # The answers the SQL files assert.
    sel = ds.sel(time=slice("2001-03-11", "2001-03-20")).where(ds.lat > 10)
    EXPECTED[f"ocean_v{fmt}"]["answers"] = {
        "avg_temp_11_20_north_of_10": repr(float(sel.temp.mean())),
        "count_temp_11_20_north_of_10": int(sel.temp.count()),
        "sum_sal_all": repr(float(ds.sal.sum())),
        "count_sal_all": int(ds.sal.count()),
        "count_temp_all": int(ds.temp.count()),
        "max_tide": repr(float(ds.tide.max())),
        "sum_land_pacific": int(ds.land.where(ds.basin == "pacific").sum()),
    }
    # The same without CF decoding: raw stored values.
    raw = xr.open_zarr(path, decode_times=False, mask_and_scale=False)
    EXPECTED[f"ocean_v{fmt}"]["raw"] = {
        "time": [int(v) for v in raw.time.values],
        "sal_sum": int(raw.sal.values.astype("int64").sum()),
        "sal_dtype": str(raw.sal.dtype),
    }

# A copy of ocean_v3 whose last temp chunk (time 16..23) is garbage: a query for earlier times
# never reads it.
path = fresh("ocean_corrupt_tail.zarr")
shutil.copytree(HERE / "ocean_v3.zarr", path, dirs_exist_ok=True)
(path / "temp" / "c" / "2" / "0" / "0").write_bytes(b"not a zstd frame")

# A dimension without a coordinate, and a string dimension coordinate.
stations = xr.Dataset(
    {
        "level": (("station", "obs"), np.arange(12, dtype="float64").reshape(3, 4) / 4),
        "flag": (("obs",), np.array([1, 0, 1, 1], dtype="int8")),
    },
    coords={
        "station": ["north", "east", "south"],
        # Object strings: Zarr v3 `string` with vlen-utf8, v2 `|O` with the vlen-utf8 filter.
        "label": ("obs", np.array(["a", "bb", "", "dddd"], dtype=object)),
    },
    attrs={"id": "stations-b", "project": "moorings"},
)
for fmt in (3, 2):
    path = fresh(f"stations_v{fmt}.zarr")
    stations.to_zarr(path, zarr_format=fmt, consolidated=True)
    record(f"stations_v{fmt}", path)

# zarr-python alone: a group (not consolidated) holding a struct variable with dimension names
# and its coordinate.
path = fresh("struct_group.zarr")
root = zarr.open_group(path, mode="w", zarr_format=3, attributes={"id": "structs-c", "depth_m": 12})
POINT = np.dtype([("u", "<f4"), ("v", "<f4"), ("quality", "u1")])
data = np.zeros((6,), dtype=POINT)
data["u"] = np.arange(6) * 0.5
data["v"] = -np.arange(6) * 0.25
data["quality"] = np.arange(6) % 3
var = root.create_array("current", shape=(6,), chunks=(4,), dtype=POINT,
                        fill_value=np.zeros((), dtype=POINT)[()], dimension_names=["step"])
var[...] = data
coord = root.create_array("step", shape=(6,), chunks=(6,), dtype="int32", dimension_names=["step"])
coord[...] = np.arange(6) * 10
EXPECTED["struct_group"] = {
    "step": coord[...].tolist(),
    "u": [repr(float(x)) for x in data["u"]],
    "v": [repr(float(x)) for x in data["v"]],
    "quality": data["quality"].tolist(),
    "attrs": dict(root.attrs),
}

# ---------------------------------------------------------------- bad input
bad = xr.Dataset({"a": (("x",), np.arange(3.0))}, coords={"x": [1, 2, 3]})
path = fresh("bad/sizes_disagree.zarr")
bad.to_zarr(path, zarr_format=3, consolidated=True)
other = zarr.open_group(path, mode="a")
b = other.create_array("b", shape=(4,), dtype="float64", dimension_names=["x"])
b[...] = np.arange(4.0)
zarr.consolidate_metadata(path)

path = fresh("bad/coordinate_length.zarr")
root = zarr.open_group(path, mode="w", zarr_format=3)
v = root.create_array("v", shape=(3,), dtype="float64", dimension_names=["x"])
v[...] = [1.0, 2.0, 3.0]
c = root.create_array("x", shape=(4,), dtype="float64", dimension_names=["x"])
c[...] = [0.0, 1.0, 2.0, 3.0]

cal = xr.Dataset(
    {"v": (("time",), np.arange(3.0))},
    coords={"time": ("time", np.arange(3), {"units": "days since 2000-01-01", "calendar": "noleap"})},
)
path = fresh("bad/noleap_calendar.zarr")
cal.to_zarr(path, zarr_format=3, consolidated=True)

path = fresh("bad/empty_group.zarr")
zarr.open_group(path, mode="w", zarr_format=3, attributes={"title": "nothing here"})

(HERE / "expected.json").write_text(json.dumps(EXPECTED, indent=1, sort_keys=True) + "\n")
print("wrote", ", ".join(sorted(EXPECTED)))
