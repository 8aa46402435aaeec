"""Writes the fixtures of ndfusion's statistics and order tests with xarray 2026.9.0
(zarr-python 3.4.2): a dataset chunked along time only (so its rows come in time order), the
same dataset split by month into a collection of three stores, and an ERA5-shaped Zarr v2
store whose chunks split the spatial dimensions (a TopK's dynamic filter prunes its chunks).

Run from the repository root:

    PYENV_VERSION=3.12.1 python3.12 -m pip install xarray==2026.9.0 zarr==3.4.2 pandas==3.1.1
    PYENV_VERSION=3.12.1 python3.12 tests/data/ordered/make_fixtures.py

`expected.json` holds what xarray computes on them: the extremes of the coordinates, the
first and last rows in the scan's order, the monthly means (`resample`), means grouped by a
function of a coordinate (`groupby`) and a range over the collection. Floats are `repr`
strings, times integer nanoseconds since 1970.
"""

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
import zarr

assert xr.__version__ == "2026.9.0", xr.__version__
assert zarr.__version__ == "3.4.2", zarr.__version__
warnings.filterwarnings("ignore")

HERE = Path(__file__).resolve().parent


def fresh(name):
    path = HERE / name
    if path.exists():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def ns(t):
    return int(pd.Timestamp(t).value)


def rows(df):
    return [
        [ns(r.time), repr(float(r.lat)), repr(float(r.lon)), repr(float(r.temp))]
        for r in df.itertuples()
    ]


# 90 days (January to March 2001) x 4 latitudes (descending, as weather grids are) x 3
# longitudes; chunked along time only, 10 days a chunk.
TIME = pd.date_range("2001-01-01", periods=90, freq="D")
LAT = np.array([40.0, 30.0, 20.0, 10.0])
LON = np.array([0.0, 10.0, 20.0])
rng = np.random.default_rng(11)
shape = (len(TIME), len(LAT), len(LON))
temp = (10 + np.arange(len(TIME))[:, None, None] / 10 + LAT[None, :, None] / 4
        + rng.normal(0, 1, shape)).astype("float32")
weather = xr.Dataset(
    {"temp": (("time", "lat", "lon"), temp, {"units": "degC"})},
    coords={"time": TIME, "lat": LAT, "lon": LON},
    attrs={"id": "weather", "source": "synthetic"},
)
encoding = {
    "time": {"units": "days since 2001-01-01", "calendar": "proleptic_gregorian", "dtype": "int64"},
    "temp": {"chunks": (10, 4, 3)},
}
path = fresh("weather.zarr")
weather.to_zarr(path, zarr_format=3, encoding=encoding, consolidated=True)
ds = xr.open_zarr(path)
df = ds.to_dataframe().reset_index()

# Means over every cell of a month, of a band of latitudes (no cell is missing).
monthly = ds.temp.resample(time="1MS").mean(...)
bands = ds.temp.groupby(np.floor(ds.lat / 20).rename("band")).mean(...)
day = ds.sel(time=slice("2001-02-10", "2001-02-12"))
last = df[df.time == df.time.max()].sort_values(["lat", "lon"], ascending=[True, False])
first = df[df.time == df.time.min()]
expected = {
    "rows": len(df),
    "min_time": ns(ds.time.min().values),
    "max_time": ns(ds.time.max().values),
    "max_lat": repr(float(ds.lat.max())),
    "min_lat": repr(float(ds.lat.min())),
    "max_lat_below_35": repr(float(ds.lat.where(ds.lat < 35, drop=True).max())),
    "max_time_before_feb": ns(ds.time.where(ds.time < np.datetime64("2001-02-01"), drop=True).max().values),
    # ORDER BY time DESC, lat, lon DESC LIMIT 3 (the scan read backwards).
    "last_rows": rows(last.head(3)),
    # The scan's own order: ORDER BY time, lat DESC, lon LIMIT 3.
    "first_rows": rows(first.head(3)),
    "monthly_means": [[ns(t), repr(float(v))] for t, v in zip(monthly.time.values, monthly.values)],
    "band_means": [[repr(float(b)), repr(float(v))] for b, v in zip(bands.band.values, bands.values)],
    "range_mean": repr(float(day.temp.mean())),
    "range_count": int(day.temp.count()),
}

# The same split by month: three stores, each with its own time range.
for month, part in weather.groupby("time.month"):
    path = fresh(f"weather_months/2001-{month:02d}.zarr")
    part = part.assign_attrs(month=f"2001-{month:02d}")
    enc = {"time": dict(encoding["time"]), "temp": {"chunks": (10, 4, 3)}}
    part.to_zarr(path, zarr_format=3, encoding=enc, consolidated=True)

# A larger grid: 40 days x 32 x 40 cells, so a day's cells (1280) are a run long enough for
# the run aggregate (src/scan/run_aggregate.rs); two months.
DAYS = pd.date_range("2002-01-12", periods=40, freq="D")
grid = xr.Dataset(
    {"t": (("time", "y", "x"),
           (np.arange(40)[:, None, None] + rng.normal(0, 1, (40, 32, 40))).astype("float32"))},
    coords={"time": DAYS, "y": np.arange(32), "x": np.arange(40)},
)
path = fresh("daily_grid.zarr")
grid.to_zarr(path, zarr_format=3, consolidated=True,
             encoding={"time": dict(encoding["time"]), "t": {"chunks": (10, 32, 40)}})
g = xr.open_zarr(path)
by_month = g.t.resample(time="1MS")
expected["grid_monthly"] = [
    [ns(t), repr(float(m)), repr(float(lo)), int(n)]
    for t, m, lo, n in zip(by_month.mean(...).time.values, by_month.mean(...).values,
                           by_month.min(...).values, by_month.count(...).values)
]

# An ERA5-shaped Zarr v2 store: hourly times x descending latitudes x longitudes, chunks that
# split the spatial dimensions as the CDS and most archives write them (4 times x 5 x 8 of a
# 12 x 9 x 16 grid: 3 time slabs of 4 chunks). Rows of a chunk run through all its times
# before the next chunk, so no order is declared and a TopK reads chunks by their ranges.
era5_rng = np.random.default_rng(12)
HOURS = pd.date_range("2020-06-01", periods=12, freq="h")
era5 = xr.Dataset(
    {"t2m": (("time", "latitude", "longitude"),
             (280 + np.arange(12)[:, None, None] / 4
              + era5_rng.normal(0, 2, (12, 9, 16))).astype("float32"),
             {"units": "K"})},
    coords={"time": HOURS, "latitude": np.linspace(60.0, 20.0, 9),
            "longitude": np.arange(16) * 2.5},
)
path = fresh("era5_like_v2.zarr")
era5.to_zarr(path, zarr_format=2, consolidated=True,
             encoding={"time": {"units": "hours since 2020-06-01", "dtype": "int64"},
                       "t2m": {"chunks": (4, 5, 8)}})
e = xr.open_zarr(path).to_dataframe().reset_index()
top = e.sort_values(["time", "t2m"], ascending=False).head(10)
expected["era5_top10"] = [
    [ns(r.time), repr(float(r.latitude)), repr(float(r.longitude)), repr(float(r.t2m))]
    for r in top.itertuples()
]
first = e.sort_values(["time", "t2m"], ascending=True).head(10)
expected["era5_first10"] = [
    [ns(r.time), repr(float(r.latitude)), repr(float(r.longitude)), repr(float(r.t2m))]
    for r in first.itertuples()
]

(HERE / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
print("wrote the fixtures in", HERE)
