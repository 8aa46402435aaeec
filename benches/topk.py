# Top-k on an archive layout (issue 43, item 5), whole ndfusion processes (BENCHMARKS.md):
# /tmp/ndfusion-before and /tmp/ndfusion-after are two release builds to compare.
#
# Writes, with xarray 2026.9.0 and zarr-python 3.4.2 (target/python-venv), an ERA5-shaped
# Zarr v2 store whose chunks split the spatial dimensions as the CDS writes them: a year of
# hourly times (8,760) x 181 latitudes x 360 longitudes of float32 (571M cells, 2.3 GB
# decoded), chunks of 24 x 91 x 180 (365 time slabs of 4 chunks). Then, per build, the median
# of 5 runs after a warm-up of a full scan, of `ORDER BY time DESC LIMIT 10`, and of
# `max(time)` (answered from statistics: what a query costs before it reads a chunk), and the
# chunks each fetches (EXPLAIN ANALYZE).
#
#   target/python-venv/bin/python benches/topk.py [--generate: only write the store]
import os, re, statistics, subprocess, sys, time

import numpy as np
import pandas as pd
import xarray as xr

path = "/work/main/target/bench-data/era5_year_v2.zarr"
if not os.path.exists(path):
    rng = np.random.default_rng(5)
    shape = (8760, 181, 360)
    t2m = (280 + rng.normal(0, 5, shape)).astype("float32")
    ds = xr.Dataset(
        {"t2m": (("time", "latitude", "longitude"), t2m, {"units": "K"})},
        coords={
            "time": pd.date_range("2021-01-01", periods=8760, freq="h"),
            "latitude": np.linspace(90.0, -90.0, 181),
            "longitude": np.arange(360.0),
        },
    )
    ds.to_zarr(path, zarr_format=2, consolidated=True,
               encoding={"time": {"units": "hours since 2021-01-01", "dtype": "int64"},
                         "t2m": {"chunks": (24, 91, 180)}})
    print("wrote", path, flush=True)
if "--generate" in sys.argv:
    sys.exit()

create = f"CREATE EXTERNAL TABLE e STORED AS ZARR LOCATION '{path}'"
queries = {
    "full scan: SELECT avg(t2m) FROM e": "SELECT avg(t2m) FROM e",
    "top-k: SELECT time, latitude, longitude, t2m FROM e ORDER BY time DESC LIMIT 10":
        "SELECT time, latitude, longitude, t2m FROM e ORDER BY time DESC LIMIT 10",
    "no chunk read: SELECT max(time) FROM e": "SELECT max(time) FROM e",
}
builds = {"before": "/tmp/ndfusion-before", "after": "/tmp/ndfusion-after"}


def run(binary, sql):
    start = time.perf_counter()
    r = subprocess.run([binary, "-q", "--format", "csv", "-c", create, "-c", sql],
                       capture_output=True)
    elapsed = time.perf_counter() - start
    assert r.returncode == 0, r.stderr
    return elapsed, r.stdout.decode()


for qname, sql in queries.items():
    for build, binary in builds.items():
        times = [run(binary, sql)[0] for _ in range(6)][1:]
        plan = run(binary, "EXPLAIN ANALYZE " + sql)[1]
        # Counts as EXPLAIN ANALYZE prints them (`1.46 K` past 1,000).
        fetched = re.findall(r"chunks_fetched=([^,\]]+)", plan)
        pruned = re.findall(r"blocks_pruned=([^,\]]+)", plan)
        answer = run(binary, sql)[1].strip().splitlines()[-1][:60]
        print(f"| {qname} | {build} | {statistics.median(times):.3f} | "
              f"{fetched[0] if fetched else 0} | "
              f"{pruned[0] if pruned else '-'} | {answer} |", flush=True)
