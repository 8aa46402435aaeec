"""Writes the fixtures of ndfusion's grid aggregate tests (issue 67) and what xarray (or pandas,
for keys xarray has no verb for) computes on them: the reductions scientists run first, each
with the SQL that asks for it.

Run from the repository root:

    PYENV_VERSION=3.12.1 python3.12 -m pip install xarray==2026.9.0 zarr==3.4.2 pandas \
        netCDF4==1.7.5.1.post1 cftime dask
    PYENV_VERSION=3.12.1 python3.12 tests/data/grid/make_fixtures.py

The stores (xarray 2026.9.0, zarr-python 3.4.2, netCDF4-python 1.7.5):

- daily_v3.zarr: 400 days x 6 latitudes (descending) x 8 longitudes of `temp` (float32, 7%
  NaN cells), `u` and `v` (float32), chunks of 30 days x 4 x 3 (every axis split, edge chunks
  partial);
- daily_v2.zarr: its `temp` as Zarr v2;
- noleap_v3.zarr: 730 days of a `noleap` calendar x 3 x 4, chunks of 100 x 2 x 3;
- hourly_v3.zarr: 240 hours x 6 x 8 of `t2m` (float32), chunks of 24 hours x 3 x 4, as the
  CDS splits latitude and longitude;
- packed.nc: netCDF-4, `t2m` int16 packed (`scale_factor`, `add_offset`, `_FillValue` on 5% of
  cells), deflate + shuffle, chunks of 31 x 4 x 5, 120 days x 8 x 10.

`expected.json` holds, per case, the table, the SQL and the rows xarray gives (keys first: times
as integer nanoseconds of their labels, values as floats, missing as null), computed in float64.
"""

import json
import shutil
import warnings
from pathlib import Path

import cftime
import numpy as np
import pandas as pd
import xarray as xr
import zarr

assert xr.__version__ == "2026.9.0", xr.__version__
assert zarr.__version__ == "3.4.2", zarr.__version__
warnings.filterwarnings("ignore")

HERE = Path(__file__).resolve().parent
CASES = []


def fresh(name):
    path = HERE / name
    if path.exists():
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    return path


def value(v):
    if v is None:
        return None
    if isinstance(v, (np.datetime64, pd.Timestamp)):
        return int(pd.Timestamp(v).value)
    if isinstance(v, cftime.datetime):
        return int(pd.Timestamp(v.year, v.month, v.day, v.hour).value)
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    v = float(v)
    return None if np.isnan(v) else v


def case(name, table, sql, frame):
    """A case: `frame`'s rows (keys, then values) are what `sql` gives on `table`."""
    rows = [[value(v) for v in row] for row in frame.itertuples(index=False)]
    CASES.append({"name": name, "table": table, "sql": sql, "rows": rows})


def frame_of(array, *names):
    """A DataArray's cells as rows: its dimensions (in `names`' order), then its values."""
    df = array.to_dataframe(name="value").reset_index()
    return df[list(names) + ["value"]]


# ------------------------------------------------------------------- the daily grid
rng = np.random.default_rng(67)
time = pd.date_range("2001-01-01", periods=400, freq="D")
lat = np.arange(2.5, -3.0, -1.0)  # descending: 2.5 .. -2.5
lon = np.arange(0.5, 8.0, 1.0)
shape = (time.size, lat.size, lon.size)
temp = 15 + 10 * np.cos(np.deg2rad(lat))[None, :, None] + rng.standard_normal(shape)
temp = temp.astype("float32")
temp[rng.random(shape) < 0.07] = np.nan
u = rng.standard_normal(shape).astype("float32")
v = rng.standard_normal(shape).astype("float32")
daily = xr.Dataset(
    {"temp": (("time", "lat", "lon"), temp), "u": (("time", "lat", "lon"), u),
     "v": (("time", "lat", "lon"), v)},
    coords={"time": time, "lat": lat, "lon": lon},
)
encoding = {name: {"chunks": (30, 4, 3)} for name in ("temp", "u", "v")}
daily.to_zarr(fresh("daily_v3.zarr"), zarr_format=3, consolidated=True, encoding=encoding)
daily[["temp"]].to_zarr(fresh("daily_v2.zarr"), zarr_format=2, consolidated=True,
                        encoding={"temp": encoding["temp"]})

d = xr.open_zarr(HERE / "daily_v3.zarr").load().astype("float64")
t = d.temp
month = "CAST(date_trunc('month', time) AS BIGINT)"
for table in ("daily_v3", "daily_v2"):
    case("per-cell monthly means", table,
         f"SELECT {month}, lat, lon, avg(temp) FROM {table} "
         "GROUP BY date_trunc('month', time), lat, lon",
         frame_of(t.resample(time="MS").mean(), "time", "lat", "lon"))
case("calendar-month climatology", "daily_v3",
     "SELECT extract(month FROM time), lat, lon, avg(temp) FROM daily_v3 "
     "GROUP BY extract(month FROM time), lat, lon",
     frame_of(t.groupby("time.month").mean("time"), "month", "lat", "lon"))
case("zonal means", "daily_v3",
     "SELECT CAST(time AS BIGINT), lat, avg(temp) FROM daily_v3 GROUP BY time, lat",
     frame_of(t.mean("lon"), "time", "lat"))
# 2 x 2 coarsening: pairs of latitudes (2.5, 1.5), (0.5, -0.5), ... and of longitudes (0.5,
# 1.5), ...; xarray labels a block by its coordinates' mean, SQL by the key.
coarse = t.coarsen(lat=2, lon=2).mean()
coarse = coarse.assign_coords(lat=np.floor((coarse.lat + 0.5) / 2), lon=np.floor(coarse.lon / 2))
case("2x2 coarsening", "daily_v3",
     "SELECT CAST(time AS BIGINT), floor((lat + 0.5) / 2), floor(lon / 2), avg(temp) FROM daily_v3 "
     "GROUP BY time, floor((lat + 0.5) / 2), floor(lon / 2)",
     frame_of(coarse, "time", "lat", "lon"))
weights = np.cos(np.deg2rad(d.lat))
case("area-weighted monthly mean", "daily_v3",
     f"SELECT {month}, sum(temp * cos(radians(lat))) / "
     "sum(cos(radians(lat))) FILTER (WHERE temp IS NOT NULL) FROM daily_v3 "
     "GROUP BY date_trunc('month', time)",
     frame_of(t.resample(time="MS").map(lambda x: x.weighted(weights).mean()), "time"))
raw = xr.open_zarr(HERE / "daily_v3.zarr").load()
speed = np.sqrt(raw.u * raw.u + raw.v * raw.v)
case("monthly mean wind speed", "daily_v3",
     f"SELECT {month}, avg(sqrt(u * u + v * v)) FROM daily_v3 GROUP BY date_trunc('month', time)",
     # u * u + v * v and its root in float32, as SQL computes them on float32 columns.
     frame_of(speed.astype("float64").resample(time="MS").mean(...), "time"))
stats = xr.Dataset({
    "count": t.count(("time", "lon")),
    "cells": t.isnull().count(("time", "lon")),
    "min": t.min(("time", "lon")),
    "max": t.max(("time", "lon")),
    "var": t.var(("time", "lon"), ddof=1),
    "var_pop": t.var(("time", "lon"), ddof=0),
    "stddev": t.std(("time", "lon"), ddof=1),
    "stddev_pop": t.std(("time", "lon"), ddof=0),
    "sum": t.sum(("time", "lon")),
})
case("statistics by latitude", "daily_v3",
     "SELECT lat, count(temp), count(*), min(temp), max(temp), var(temp), var_pop(temp), "
     "stddev(temp), stddev_pop(temp), sum(temp) FROM daily_v3 GROUP BY lat",
     stats.to_dataframe().reset_index()[["lat", "count", "cells", "min", "max", "var", "var_pop",
                                         "stddev", "stddev_pop", "sum"]])
# Booleans: pandas, NaN dropped as SQL skips NULL.
cells = d.to_dataframe().reset_index()
known = cells.dropna(subset=["temp"])
booleans = known.groupby("lon").agg(
    all_warm=("temp", lambda s: bool((s > 10).all())),
    any_hot=("temp", lambda s: bool((s > 27).any())),
).reset_index()
case("bool_and and bool_or by longitude", "daily_v3",
     "SELECT lon, bool_and(temp > 10), bool_or(temp > 27) FROM daily_v3 GROUP BY lon",
     booleans)
case("a WHERE on values, monthly", "daily_v3",
     f"SELECT {month}, avg(temp), count(*) FROM daily_v3 WHERE temp > 20 "
     "GROUP BY date_trunc('month', time)",
     xr.Dataset({"avg": t.where(t > 20).resample(time="MS").mean(...),
                 "count": (t > 20).resample(time="MS").sum(...)}).to_dataframe().reset_index()
     [["time", "avg", "count"]])
spring = t.sel(time=slice("2001-03-01", "2001-05-31"))
case("a time range by latitude", "daily_v3",
     "SELECT lat, avg(temp - 273.15) FROM daily_v3 "
     "WHERE time >= '2001-03-01' AND time < '2001-06-01' GROUP BY lat",
     frame_of((spring - 273.15).mean(("time", "lon")), "lat"))
by_year_month = t.groupby(t.time.dt.year * 100 + t.time.dt.month).mean(...)
ym = by_year_month.to_dataframe(name="value").reset_index()
ym.insert(0, "year", ym.iloc[:, 0] // 100)
ym.insert(1, "month", ym.iloc[:, 1] % 100)
case("two keys of one axis", "daily_v3",
     "SELECT extract(year FROM time), extract(month FROM time), avg(temp) FROM daily_v3 "
     "GROUP BY extract(year FROM time), extract(month FROM time)",
     ym[["year", "month", "value"]])
case("a global aggregate with FILTER", "daily_v3",
     "SELECT avg(temp), max(temp) FILTER (WHERE lat < 0), count(*) FROM daily_v3",
     pd.DataFrame([[float(t.mean()), float(t.where(t.lat < 0).max()), t.size]]))

# ------------------------------------------------------------------- a noleap calendar
noleap_time = xr.date_range("2001-01-01", periods=730, freq="D", calendar="noleap",
                            use_cftime=True)
nl = xr.Dataset(
    {"tas": (("time", "lat", "lon"), (270 + rng.standard_normal((730, 3, 4))).astype("float32"))},
    coords={"time": noleap_time, "lat": [10.0, 0.0, -10.0], "lon": [0.0, 90.0, 180.0, 270.0]},
)
nl.to_zarr(fresh("noleap_v3.zarr"), zarr_format=3, consolidated=True,
           encoding={"tas": {"chunks": (100, 2, 3)}})
n = xr.open_zarr(HERE / "noleap_v3.zarr", use_cftime=True).load().astype("float64")
case("noleap monthly means", "noleap_v3",
     f"SELECT {month}, lat, avg(tas) FROM noleap_v3 GROUP BY date_trunc('month', time), lat",
     frame_of(n.tas.resample(time="MS").mean(("time", "lon")), "time", "lat"))

# ------------------------------------------------------------------- hourly, diurnal cycle
hours = pd.date_range("2020-07-01", periods=240, freq="h")
hlat = np.linspace(60.0, 35.0, 6)
hlon = np.linspace(-10.0, 25.0, 8)
diurnal = 290 + 5 * np.sin(2 * np.pi * hours.hour.to_numpy() / 24)[:, None, None]
t2m = (diurnal + rng.standard_normal((240, 6, 8))).astype("float32")
hourly = xr.Dataset({"t2m": (("time", "latitude", "longitude"), t2m)},
                    coords={"time": hours, "latitude": hlat, "longitude": hlon})
hourly.to_zarr(fresh("hourly_v3.zarr"), zarr_format=3, consolidated=True,
               encoding={"t2m": {"chunks": (24, 3, 4)}})
h = xr.open_zarr(HERE / "hourly_v3.zarr").load().astype("float64")
case("diurnal climatology", "hourly_v3",
     "SELECT extract(hour FROM time), latitude, longitude, avg(t2m) FROM hourly_v3 "
     "GROUP BY extract(hour FROM time), latitude, longitude",
     frame_of(h.t2m.groupby("time.hour").mean("time"), "hour", "latitude", "longitude"))

# ------------------------------------------------------------------- packed netCDF-4
ptime = pd.date_range("2001-01-01", periods=120, freq="D")
plat = np.arange(70.0, 30.0, -5.0)
plon = np.arange(0.0, 50.0, 5.0)
packed_values = 280 + 15 * rng.standard_normal((120, 8, 10))
packed_values[rng.random(packed_values.shape) < 0.05] = np.nan
packed = xr.Dataset({"t2m": (("time", "lat", "lon"), packed_values)},
                    coords={"time": ptime, "lat": plat, "lon": plon})
packed.to_netcdf(fresh("packed.nc"), engine="netcdf4", format="NETCDF4", encoding={"t2m": {
    "dtype": "int16", "scale_factor": 0.01, "add_offset": 280.0, "_FillValue": -32767,
    "zlib": True, "complevel": 1, "shuffle": True, "chunksizes": (31, 4, 5)}})
p = xr.open_dataset(HERE / "packed.nc", engine="netcdf4").load().astype("float64")
case("packed netCDF-4 monthly means", "packed",
     f"SELECT {month}, lat, lon, avg(t2m) FROM packed GROUP BY date_trunc('month', time), lat, lon",
     frame_of(p.t2m.resample(time="MS").mean(), "time", "lat", "lon"))
case("packed netCDF-4 zonal extremes", "packed",
     "SELECT lat, min(t2m), max(t2m), count(t2m) FROM packed GROUP BY lat",
     xr.Dataset({"min": p.t2m.min(("time", "lon")), "max": p.t2m.max(("time", "lon")),
                 "count": p.t2m.count(("time", "lon"))}).to_dataframe().reset_index()
     [["lat", "min", "max", "count"]])

# ------------------------------------------------------------------- anomalies
# A cell's row of a climatology, by a join on the climatology's keys or by a window over
# whole partitions (both answered by a lookup by grid position).
clim_sql = ("WITH c AS (SELECT extract(month FROM time) AS mo, lat, lon, avg(temp) AS m "
            "FROM daily_v3 GROUP BY 1, 2, 3) ")
on = "ON extract(month FROM d.time) = c.mo AND d.lat = c.lat AND d.lon = c.lon"
anomaly = t.groupby("time.month") - t.groupby("time.month").mean("time")
case("anomaly against the climatology (join)", "daily_v3",
     clim_sql + f"SELECT avg(abs(d.temp - c.m)), count(*) FROM daily_v3 d JOIN c {on}",
     pd.DataFrame([[float(abs(anomaly).mean()), anomaly.size]]))
case("anomaly against the climatology (window)", "daily_v3",
     "SELECT avg(abs(temp - m)), count(*) FROM (SELECT temp, avg(temp) OVER "
     "(PARTITION BY extract(month FROM time), lat, lon) AS m FROM daily_v3) w",
     pd.DataFrame([[float(abs(anomaly).mean()), anomaly.size]]))
late = anomaly.sel(time=slice("2001-07-01", None))
case("zonal anomaly spread of a time range (join)", "daily_v3",
     clim_sql + f"SELECT d.lat, avg(abs(d.temp - c.m)), count(d.temp) FROM daily_v3 d JOIN c {on} "
     "WHERE d.time >= '2001-07-01' GROUP BY d.lat",
     xr.Dataset({"avg": abs(late).mean(("time", "lon")), "count": late.count(("time", "lon"))})
     .to_dataframe().reset_index()[["lat", "avg", "count"]])
# A climatology of the first quarter alone: the other months' cells find no row (pandas: an
# inner merge).
cells["mo"] = cells.time.dt.month
base = (cells[cells.time < "2001-04-01"].groupby(["mo", "lat", "lon"]).temp.mean()
        .rename("m").reset_index())
joined = cells.merge(base, on=["mo", "lat", "lon"], how="inner")
joined["diff"] = joined.temp - joined.m
case("anomaly against a base period's climatology (join, months without one dropped)",
     "daily_v3",
     "WITH c AS (SELECT extract(month FROM time) AS mo, lat, lon, avg(temp) AS m FROM daily_v3 "
     "WHERE time < '2001-04-01' GROUP BY 1, 2, 3) "
     f"SELECT c.mo, avg(d.temp - c.m), count(*) FROM daily_v3 d JOIN c {on} GROUP BY c.mo",
     joined.groupby("mo").agg(avg=("diff", "mean"), count=("diff", "size")).reset_index())
early = cells[cells.time < "2001-03-01"].copy()
early["m"] = early.groupby("lat").temp.transform("mean")
case("a window by latitude under a WHERE, by longitude", "daily_v3",
     "SELECT lon, max(temp - m), count(*) FROM (SELECT lon, temp, avg(temp) OVER "
     "(PARTITION BY lat) AS m FROM daily_v3 WHERE time < '2001-03-01') w GROUP BY lon",
     (early.temp - early.m).groupby(early.lon).agg(["max", "size"]).reset_index())
hourly_anomaly = h.t2m.groupby("time.hour") - h.t2m.groupby("time.hour").mean("time")
case("diurnal anomaly (join)", "hourly_v3",
     "WITH c AS (SELECT extract(hour FROM time) AS hr, latitude, longitude, avg(t2m) AS m "
     "FROM hourly_v3 GROUP BY 1, 2, 3) SELECT avg(abs(h.t2m - c.m)) FROM hourly_v3 h JOIN c "
     "ON extract(hour FROM h.time) = c.hr AND h.latitude = c.latitude "
     "AND h.longitude = c.longitude",
     pd.DataFrame([[float(abs(hourly_anomaly).mean())]]))
packed_anomaly = p.t2m.groupby("time.month") - p.t2m.groupby("time.month").mean("time")
case("packed netCDF-4 anomaly (window)", "packed",
     "SELECT avg(abs(t2m - m)), count(t2m) FROM (SELECT t2m, avg(t2m) OVER "
     "(PARTITION BY extract(month FROM time), lat, lon) AS m FROM packed) w",
     pd.DataFrame([[float(abs(packed_anomaly).mean()), int(packed_anomaly.count())]]))

(HERE / "expected.json").write_text(json.dumps({"cases": CASES}) + "\n")
print(f"{len(CASES)} cases")
