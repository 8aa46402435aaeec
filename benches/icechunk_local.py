# Icechunk against plain Zarr on the same chunks (issue 43, item 1), whole ndfusion processes
# (BENCHMARKS.md): /tmp/ndfusion-before-ic and /tmp/ndfusion-after are two release builds.
#
# Writes, with xarray 2026.9.0, zarr-python 3.4.2 and icechunk-python 2.3.0
# (target/python-venv), 1000 days x 100 latitudes x 1000 longitudes of float32 (100M cells,
# chunks of 10 days, zstd) once as a plain Zarr v3 folder and once into a local Icechunk
# repository with the same chunks. Then per build and store the median of 5 runs after a
# warm-up, and the peak RSS of one more (GNU time's maximum resident set).
#
#   target/python-venv/bin/python benches/icechunk_local.py [--generate]
import os, re, statistics, subprocess, sys, time

import numpy as np
import pandas as pd
import xarray as xr

base = "/work/main/target/bench-data"
plain = f"{base}/ic_bench_plain.zarr"
repo = f"{base}/ic_bench.icechunk"
if not os.path.exists(repo):
    import icechunk
    rng = np.random.default_rng(3)
    ds = xr.Dataset(
        {"temp": (("time", "lat", "lon"),
                  (15 + rng.normal(0, 3, (1000, 100, 1000))).astype("float32"))},
        coords={"time": pd.date_range("2000-01-01", periods=1000, freq="D"),
                "lat": np.linspace(-50.0, 50.0, 100), "lon": np.arange(1000) * 0.36},
    )
    enc = {"temp": {"chunks": (10, 100, 1000)}}
    ds.to_zarr(plain, zarr_format=3, consolidated=False, encoding=enc, mode="w")
    r = icechunk.Repository.create(icechunk.local_filesystem_storage(repo))
    session = r.writable_session("main")
    ds.to_zarr(session.store, zarr_format=3, consolidated=False, encoding=enc, mode="w")
    session.commit("the benchmark dataset")
    print("wrote", plain, "and", repo, flush=True)
if "--generate" in sys.argv:
    sys.exit()

stores = {
    "plain Zarr": f"CREATE EXTERNAL TABLE d STORED AS ZARR LOCATION '{plain}'",
    "Icechunk": f"CREATE EXTERNAL TABLE d STORED AS ICECHUNK LOCATION '{repo}'",
}
queries = {
    "full avg": "SELECT avg(temp) FROM d",
    "1% range": "SELECT avg(temp) FROM d WHERE time < '2000-01-11'",
    "box": "SELECT avg(temp) FROM d WHERE lat > 0 AND lon < 180",
}
builds = {"before": "/tmp/ndfusion-before-ic", "after": "/tmp/ndfusion-after"}


def run(binary, create, sql, timed=True):
    cmd = [binary, "-q", "--format", "csv", "-c", create, "-c", sql]
    if not timed:
        cmd = ["/usr/bin/time", "-f", "%M"] + cmd
    start = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True)
    elapsed = time.perf_counter() - start
    assert r.returncode == 0, r.stderr
    return elapsed, r.stdout.decode().strip().splitlines()[-1], r.stderr.decode()


for qname, sql in queries.items():
    for build, binary in builds.items():
        for store, create in stores.items():
            times = [run(binary, create, sql)[0] for _ in range(6)][1:]
            _, answer, err = run(binary, create, sql, timed=False)
            rss = int(err.strip().splitlines()[-1]) / 1024
            print(f"| {qname} | {build} | {store} | {statistics.median(times):.3f} | "
                  f"{rss:.0f} | {answer[:24]} |", flush=True)
