"""The Python benchmark (BENCHMARKS.md, "From Python"): one xarray-written dataset, four queries,
four ways to answer them, in one run:

- ndfusion's ZarrTable in a datafusion-python SessionContext (through the FFI);
- the same SQL in the `ndfusion` command line (release build), which reports each
  statement's time: what the FFI boundary costs;
- xarray-sql 0.6 (`XarrayContext().from_dataset`, DataFusion over the Dataset's dask chunks);
- xarray + pandas (`sel`, `to_dataframe`, then pandas).

Every answer is checked against the others before a time is reported.

    scripts/ensure-protoc.sh && cargo build --release --bin ndfusion
    PYENV_VERSION=3.12.1 python3.12 -m venv target/python-bench
    target/python-bench/bin/pip install './python[xarray]' xarray-sql==0.6.0 zarr==3.4.2 dask
    target/python-bench/bin/python python/benches/compare.py [--runs 5]

The dataset is benches/compare.rs's (`target/bench-data/dataset_100M.zarr`, or under
$NDFUSION_BENCH_DIR): written here the same way when it is missing.
"""

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import time
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[2]
BENCH_DIR = Path(os.environ.get("NDFUSION_BENCH_DIR", ROOT / "target" / "bench-data"))
DATASET = BENCH_DIR / "dataset_100M.zarr"
# The command line compared with (NDFUSION_CLI: another build, e.g. a "before" one).
CLI = Path(os.environ.get("NDFUSION_CLI", ROOT / "target" / "release" / "ndfusion"))

# lat: 100 values from -49.5 by 1; lon: 1000 from 0.05 by 0.1; time: 1000 days from 2000-01-01.
QUERIES = {
    "full": ("avg(temp), all 100M cells", "SELECT avg(temp) FROM d"),
    "range": (
        "avg(temp), 1% time range (10 days)",
        "SELECT avg(temp) FROM d WHERE time BETWEEN '2001-05-15' AND '2001-05-24'",
    ),
    "box": (
        "avg(temp), lat/lon box (1% of cells)",
        "SELECT avg(temp) FROM d WHERE lat BETWEEN 0 AND 10 AND lon BETWEEN 20 AND 30",
    ),
    "group": (
        "monthly means (GROUP BY, 33 groups)",
        "SELECT date_trunc('month', time) AS month, avg(temp) AS temp FROM d "
        "GROUP BY month ORDER BY month",
    ),
}


def write_dataset():
    """benches/compare.rs's dataset_location, in the same words."""
    import numpy as np
    import pandas as pd
    import xarray as xr

    rng = np.random.default_rng(1)
    time_ = pd.date_range("2000-01-01", periods=1000, freq="D")
    lat = np.linspace(-49.5, 49.5, 100)
    lon = np.linspace(0.05, 99.95, 1000)
    temp = (15 + 10 * np.cos(np.deg2rad(lat))[None, :, None]
            + rng.standard_normal((1000, 100, 1000), dtype="float32")).astype("float32")
    ds = xr.Dataset({"temp": (("time", "lat", "lon"), temp)},
                    coords={"time": time_, "lat": lat, "lon": lon})
    ds.to_zarr(DATASET, zarr_format=3, consolidated=True,
               encoding={"temp": {"chunks": (10, 100, 1000)}})


def median_time(run, runs):
    """The median of `runs` timed calls after one warm-up call, and the last answer."""
    answer = run()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        answer = run()
        times.append(time.perf_counter() - start)
    return statistics.median(times), answer


def answer_of_table(table):
    """A scalar answer, or the list of monthly means."""
    columns = table.column_names
    if len(columns) == 1:
        return [float(table.column(0)[0].as_py())]
    return [float(v) for v in table.column(columns[-1]).to_pylist()]


def ndfusion_python(runs):
    import datafusion
    import ndfusion

    ctx = datafusion.SessionContext()
    ctx.register_table("d", ndfusion.ZarrTable(str(DATASET)))

    def query(sql):
        return answer_of_table(pa.Table.from_batches(ctx.sql(sql).collect()))

    return {k: median_time(lambda: query(sql), runs) for k, (_, sql) in QUERIES.items()}


def ndfusion_cli(runs):
    """Per query, one process for the answer (`--quiet`, CSV) and one for the times: CREATE,
    a warm-up, then `runs` statements; the times are those the CLI prints for each statement
    (planning and execution, no process start)."""
    create = ["-c", f"CREATE EXTERNAL TABLE d STORED AS ZARR LOCATION '{DATASET}'"]
    out = {}
    for key, (_, sql) in QUERIES.items():
        def cli(*args):
            return subprocess.run([str(CLI), "--format", "csv", *create, *args],
                                  check=True, capture_output=True, text=True).stdout
        rows = cli("--quiet", "-c", sql).split()[1:]
        answer = [float(row.split(",")[-1]) for row in rows]
        text = cli(*["-c", sql] * (runs + 1))
        # The CREATE statement's time comes first, then the warm-up's.
        times = [float(t) for t in re.findall(r"Elapsed ([0-9.]+) seconds", text)][2:]
        assert len(times) == runs, text[-2000:]
        out[key] = (statistics.median(times), answer)
    return out


def xarray_sql(ds, runs):
    from xarray_sql import XarrayContext

    ctx = XarrayContext()
    ctx.from_dataset("d", ds, chunks={"time": 10, "lat": 100, "lon": 1000})

    def query(sql):
        return answer_of_table(pa.Table.from_batches(ctx.sql(sql).collect()))

    return {k: median_time(lambda: query(sql), runs) for k, (_, sql) in QUERIES.items()}


def xarray_pandas(ds, runs):
    import pandas as pd

    def mean(sub):
        return [float(sub.to_dataframe()["temp"].mean())]

    def monthly():
        frame = ds.temp.to_dataframe()
        means = frame.groupby(pd.Grouper(level="time", freq="MS"))["temp"].mean()
        return [float(v) for v in means]

    calls = {
        "full": lambda: mean(ds),
        "range": lambda: mean(ds.sel(time=slice("2001-05-15", "2001-05-24"))),
        "box": lambda: mean(ds.sel(lat=slice(0, 10), lon=slice(20, 30))),
        "group": monthly,
    }
    return {k: median_time(call, runs) for k, call in calls.items()}


def agree(a, b):
    return len(a) == len(b) and all(math.isclose(x, y, rel_tol=1e-5) for x, y in zip(a, b))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5, help="timed runs of the fast contenders")
    parser.add_argument("--slow-runs", type=int, default=3,
                        help="timed runs of xarray-sql and xarray + pandas")
    args = parser.parse_args()
    if not DATASET.exists():
        BENCH_DIR.mkdir(parents=True, exist_ok=True)
        write_dataset()
    import xarray as xr

    ds = xr.open_zarr(DATASET)
    results = {
        "ndfusion (datafusion-python)": ndfusion_python(args.runs),
        "ndfusion CLI": ndfusion_cli(args.runs),
        "xarray-sql 0.6": xarray_sql(ds, args.slow_runs),
        "xarray + pandas": xarray_pandas(ds, args.slow_runs),
    }
    reference = results["xarray + pandas"]
    for who, answers in results.items():
        for key, (_, answer) in answers.items():
            assert agree(answer, reference[key][1]), (who, key, answer[:3], reference[key][1][:3])

    names = list(results)
    print("| query | " + " | ".join(names) + " | Python / CLI |")
    print("|---|" + "---:|" * (len(names) + 1))
    for key, (label, _) in QUERIES.items():
        cells = [f"{results[n][key][0]:.3f} s" for n in names]
        ratio = results[names[0]][key][0] / results[names[1]][key][0]
        print(f"| {label} | " + " | ".join(cells) + f" | {ratio:.2f} |")
    (BENCH_DIR / "python_bench.json").write_text(json.dumps(
        {n: {k: t for k, (t, _) in r.items()} for n, r in results.items()}, indent=1))


if __name__ == "__main__":
    main()
