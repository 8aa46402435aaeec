"""Issue 67's benchmark: the reductions scientists run first, on gridded data, by ndfusion and
by xarray + dask, DuckDB on Parquet of the same cells, and xarray-sql. Every query runs as a
whole process of its own (startup, opening and reading included), its wall time and peak RSS
taken from the process (os.wait4); the result is computed whole and reduced to a checksum
(SQL: `SELECT sum(v), count(*) FROM (<query>)`; xarray: `.compute()` then a sum), and the
checksums of all tools are compared.

    PYENV_VERSION=3.12.1 python3.12 benches/grid_analysis.py [--repeat 3] [--only NAME]
        [--ndfusion target/release/ndfusion] [--data target/bench-data] [--tools a,b,...]

Data (generated into --data when missing, by xarray 2026.9 / netCDF4 / pyarrow):

- dataset_100M.zarr: the 100M-cell dataset of benches/compare.rs (1000 days x 100 latitudes x
  1000 longitudes of float32 `temp`, zstd, chunks of 10 days);
- dataset_100M.parquet: its cells, for DuckDB (time, lat, lon, temp; row groups of 1M);
- era5_like_100M_nc4.nc: issue 39's netCDF-4 file (t2m int16 packed, deflate 1 + shuffle,
  chunks of 5 days), written from era5_like_100M.nc as benches/compare.rs writes them;
- hourly_era5.zarr: 744 hours (July) x 181 latitudes (90..-90) x 360 longitudes of float32
  `t2m`, chunks of 24 hours x 91 x 180 (latitude and longitude split, as the CDS splits them),
  and hourly_era5.parquet.
"""

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def generate(data):
    data.mkdir(parents=True, exist_ok=True)
    script = textwrap.dedent(f"""
        import numpy as np, pandas as pd, xarray as xr, pyarrow as pa, pyarrow.parquet as pq
        from pathlib import Path
        data = Path({str(data)!r})
        z = data / 'dataset_100M.zarr'
        if not (z / 'zarr.json').exists():
            rng = np.random.default_rng(1)
            time = pd.date_range('2000-01-01', periods=1000, freq='D')
            lat = np.linspace(-49.5, 49.5, 100); lon = np.linspace(0.05, 99.95, 1000)
            temp = (15 + 10 * np.cos(np.deg2rad(lat))[None, :, None] + rng.standard_normal((1000, 100, 1000), dtype='float32')).astype('float32')
            ds = xr.Dataset({{'temp': (('time', 'lat', 'lon'), temp)}}, coords={{'time': time, 'lat': lat, 'lon': lon}})
            ds.to_zarr(z, zarr_format=3, consolidated=True, encoding={{'temp': {{'chunks': (10, 100, 1000)}}}})

        def parquet(zarr, out, var):
            if out.exists():
                return
            ds = xr.open_zarr(zarr)
            writer = None
            n = ds.sizes['time']
            step = max(1, 10_000_000 // (ds[var].size // n))
            for start in range(0, n, step):
                df = ds[var].isel(time=slice(start, start + step)).to_dataframe().reset_index()
                table = pa.Table.from_pandas(df, preserve_index=False)
                if writer is None:
                    writer = pq.ParquetWriter(out, table.schema, compression='zstd')
                writer.write_table(table, row_group_size=1_000_000)
            writer.close()

        parquet(z, data / 'dataset_100M.parquet', 'temp')
        nc3 = data / 'era5_like_100M.nc'
        if not nc3.exists():
            rng = np.random.default_rng(2)
            time = pd.date_range('2000-01-01', periods=1000, freq='D')
            lat = np.linspace(49.5, -49.5, 100); lon = np.linspace(0.05, 99.95, 1000)
            t2m = (280 + 10 * np.cos(np.deg2rad(lat))[None, :, None] + rng.standard_normal((1000, 100, 1000), dtype='float32')).astype('float32')
            ds = xr.Dataset({{'t2m': (('time', 'latitude', 'longitude'), t2m, {{'units': 'K'}})}}, coords={{'time': time, 'latitude': lat, 'longitude': lon}})
            packed = {{'dtype': 'int16', 'scale_factor': 0.0015, 'add_offset': 280.0, '_FillValue': -32767}}
            ds.to_netcdf(nc3, format='NETCDF3_64BIT', engine='netcdf4', unlimited_dims=['time'], encoding={{'t2m': packed, 'time': {{'dtype': 'int32', 'units': 'hours since 1900-01-01'}}}})
        nc4 = data / 'era5_like_100M_nc4.nc'
        if not nc4.exists():
            ds = xr.open_dataset(nc3)
            packed = {{'dtype': 'int16', 'scale_factor': 0.0015, 'add_offset': 280.0, '_FillValue': -32767, 'zlib': True, 'complevel': 1, 'shuffle': True, 'chunksizes': (5, 100, 1000)}}
            ds.to_netcdf(nc4, format='NETCDF4', engine='netcdf4', unlimited_dims=['time'], encoding={{'t2m': packed, 'time': {{'dtype': 'int32', 'units': 'hours since 1900-01-01'}}}})
        h = data / 'hourly_era5.zarr'
        if not (h / 'zarr.json').exists():
            rng = np.random.default_rng(3)
            time = pd.date_range('2020-07-01', periods=744, freq='h')
            lat = np.linspace(90, -90, 181); lon = np.arange(0, 360, 1.0)
            hour = time.hour.to_numpy()
            t2m = np.empty((744, 181, 360), dtype='float32')
            base = (280 + 20 * np.cos(np.deg2rad(lat)))[:, None]
            for i in range(744):
                diurnal = 5 * np.sin(2 * np.pi * ((hour[i] + lon / 15) % 24) / 24)[None, :]
                t2m[i] = base + diurnal + rng.standard_normal((181, 360), dtype='float32')
            ds = xr.Dataset({{'t2m': (('time', 'latitude', 'longitude'), t2m)}}, coords={{'time': time, 'latitude': lat, 'longitude': lon}})
            ds.to_zarr(h, zarr_format=3, consolidated=True, encoding={{'t2m': {{'chunks': (24, 91, 180)}}}})
        parquet(h, data / 'hourly_era5.parquet', 't2m')
    """)
    subprocess.run([sys.executable, "-c", script], check=True)


# name -> (table, SQL of the grid query (its result's value column is `v`), xarray code giving a
# DataArray or Dataset `r` from `ds`)
QUERIES = {
    "full scan avg": (
        "d", "SELECT avg(temp) AS v FROM d",
        "r = ds.temp.mean()"),
    "per-cell monthly means": (
        "d", "SELECT date_trunc('month', time) AS m, lat, lon, avg(temp) AS v FROM d GROUP BY 1, 2, 3",
        "r = ds.temp.resample(time='MS').mean()"),
    "calendar-month climatology": (
        "d", "SELECT extract(month FROM time) AS m, lat, lon, avg(temp) AS v FROM d GROUP BY 1, 2, 3",
        "r = ds.temp.groupby('time.month').mean()"),
    "zonal means": (
        "d", "SELECT time, lat, avg(temp) AS v FROM d GROUP BY 1, 2",
        "r = ds.temp.mean('lon')"),
    "2x2 coarsening": (
        "d", "SELECT time, floor((lat + 49.5) / 2) AS a, floor(lon / 0.2) AS b, avg(temp) AS v FROM d GROUP BY 1, 2, 3",
        "r = ds.temp.coarsen(lat=2, lon=2).mean()"),
    "area-weighted monthly mean": (
        "d", "SELECT date_trunc('month', time) AS m, sum(temp * cos(radians(lat))) / sum(cos(radians(lat))) AS v FROM d GROUP BY 1",
        "import numpy as np\nw = np.cos(np.deg2rad(ds.lat))\nr = (ds.temp * w).resample(time='MS').sum(...) / (w * ds.temp.notnull()).resample(time='MS').sum(...)"),
    "anomaly (join)": (
        "d", "WITH c AS (SELECT extract(month FROM time) AS mo, lat, lon, avg(temp) AS m FROM d GROUP BY 1, 2, 3) "
             "SELECT avg(abs(d.temp - c.m)) AS v FROM d JOIN c ON extract(month FROM d.time) = c.mo AND d.lat = c.lat AND d.lon = c.lon",
        "clim = ds.temp.groupby('time.month').mean()\nr = abs(ds.temp.groupby('time.month') - clim).mean()"),
    "anomaly (window)": (
        "d", "SELECT avg(abs(temp - m)) AS v FROM (SELECT temp, avg(temp) OVER (PARTITION BY extract(month FROM time), lat, lon) AS m FROM d) w",
        None),
    "one cell's time series": (
        "d", "SELECT time, temp AS v FROM d WHERE lat = 0.5 AND lon = 50.05",
        "r = ds.temp.sel(lat=0.5, lon=50.05)"),
    "diurnal climatology": (
        "h", "SELECT extract(hour FROM time) AS hr, latitude, longitude, avg(t2m) AS v FROM h GROUP BY 1, 2, 3",
        "r = ds.t2m.groupby('time.hour').mean()"),
    "netCDF-4 full scan avg": (
        "n", "SELECT avg(t2m) AS v FROM n",
        "r = ds.t2m.mean()"),
    "netCDF-4 monthly means per cell": (
        "n", "SELECT date_trunc('month', time) AS m, latitude, longitude, avg(t2m) AS v FROM n GROUP BY 1, 2, 3",
        "r = ds.t2m.resample(time='MS').mean()"),
}

TABLES = {
    "d": ("ZARR", "dataset_100M.zarr", "dataset_100M.parquet", "zarr"),
    "h": ("ZARR", "hourly_era5.zarr", "hourly_era5.parquet", "zarr"),
    "n": ("NETCDF", "era5_like_100M_nc4.nc", None, "netcdf4"),
}


def wrapped(sql):
    if " AS v FROM" in sql and "GROUP BY" not in sql and "OVER" not in sql and "WHERE lat" not in sql:
        return f"SELECT sum(v), count(*) FROM ({sql}) q"
    return f"SELECT sum(CAST(v AS DOUBLE)), count(*) FROM ({sql}) q"


def run(cmd, env=None):
    """Wall seconds, peak RSS (MiB) and stdout of one process."""
    start = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise RuntimeError(f"{cmd[:3]} failed: {err.decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024, out.decode().strip()


def ndfusion(args, table, sql, settings=()):
    kind, path, _, _ = TABLES[table]
    cmd = [args.ndfusion, "--quiet", "--format", "csv"]
    for s in settings:
        cmd += ["-c", s]
    cmd += ["-c", f"CREATE EXTERNAL TABLE {table} STORED AS {kind} LOCATION '{args.data / path}'",
            "-c", wrapped(sql)]
    wall, rss, out = run(cmd)
    return wall, rss, out.splitlines()[-1]


def duckdb(args, table, sql):
    _, _, parquet, _ = TABLES[table]
    if parquet is None:
        return None
    script = textwrap.dedent(f"""
        import duckdb
        con = duckdb.connect()
        con.sql("SET threads = 2")
        con.sql("SET enable_progress_bar = false")
        con.sql("CREATE VIEW {table} AS SELECT * FROM read_parquet('{args.data / parquet}')")
        s, n = con.execute({wrapped(sql)!r}).fetchone()
        print(f"{{s!r}},{{n}}")
    """)
    return run([sys.executable, "-c", script])


def xarray(args, table, code):
    if code is None:
        return None
    _, path, _, engine = TABLES[table]
    opener = (f"xr.open_zarr({str(args.data / path)!r})" if engine == "zarr"
              else f"xr.open_dataset({str(args.data / path)!r}, engine='netcdf4', chunks={{'time': 5}})")
    script = textwrap.dedent(f"""
        import dask, xarray as xr, numpy as np
        dask.config.set(scheduler='threads', num_workers=2)
        ds = {opener}
    """) + code + textwrap.dedent("""
        r = r.compute()
        print(f"{float(np.nansum(r.values))!r},{int(np.count_nonzero(~np.isnan(np.asarray(r.values, dtype='float64'))))}")
    """)
    return run([sys.executable, "-c", script])


def xarray_sql(args, table, sql):
    _, path, _, engine = TABLES[table]
    if engine != "zarr":
        return None
    script = textwrap.dedent(f"""
        import xarray as xr, xarray_sql
        ds = xr.open_zarr({str(args.data / path)!r})
        ctx = xarray_sql.XarrayContext()
        ctx.from_dataset('{table}', ds, chunks={{k: v[0] for k, v in ds.chunks.items() if v[0] < ds.sizes[k]}})
        df = ctx.sql({wrapped(sql)!r}).to_pandas()
        print(f"{{df.iloc[0, 0]!r}},{{df.iloc[0, 1]}}")
    """)
    return run([sys.executable, "-c", script])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--only", default=None)
    parser.add_argument("--ndfusion", default=str(ROOT / "target/release/ndfusion"))
    parser.add_argument("--data", type=Path, default=ROOT / "target/bench-data")
    parser.add_argument("--tools", default="ndfusion,ndfusion-hash,xarray,duckdb")
    args = parser.parse_args()
    generate(args.data)
    tools = args.tools.split(",")
    results = []
    for name, (table, sql, code) in QUERIES.items():
        if args.only and args.only not in name:
            continue
        runs = {
            "ndfusion": lambda: ndfusion(args, table, sql),
            "ndfusion-hash": lambda: ndfusion(args, table, sql, ["SET ndfusion.grid_aggregate = false"]),
            "xarray": lambda: xarray(args, table, code),
            "duckdb": lambda: duckdb(args, table, sql),
            "xarray-sql": lambda: xarray_sql(args, table, sql),
        }
        row = {"query": name}
        for tool in tools:
            measured = []
            for _ in range(args.repeat):
                try:
                    m = runs[tool]()
                except Exception as e:  # a tool that fails is reported, not fatal
                    m = ("failed", str(e)[-300:])
                if m is None:
                    break
                measured.append(m)
            if not measured:
                continue
            if measured[0][0] == "failed":
                row[tool] = {"failed": measured[0][1]}
                continue
            walls = sorted(m[0] for m in measured)
            row[tool] = {"s": walls[len(walls) // 2], "mib": max(m[1] for m in measured),
                         "out": measured[-1][2]}
        results.append(row)
        print(json.dumps(row), flush=True)
    (args.data / "grid_analysis.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
