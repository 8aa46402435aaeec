# The progress line of issue 44 on and off, in whole ndfusion processes (BENCHMARKS.md):
# /tmp/ndfusion-before and /tmp/ndfusion-after are two release builds to compare.
import subprocess, time, statistics, sys, os
loc = "/work/main/target/bench-data/era5_like_100M.zarr"
create = f"CREATE EXTERNAL TABLE e STORED AS ZARR LOCATION '{loc}'"
queries = {
  "full avg": "SELECT avg(t2m) FROM e",
  "mean per latitude": "SELECT latitude, avg(t2m) FROM e GROUP BY latitude",
  "1% of times": "SELECT avg(t2m) FROM e WHERE time < '2000-01-11'",
}
variants = {
  "before (09:23 build, no counters)": ["/tmp/ndfusion-before"],
  "after, --progress never": ["/tmp/ndfusion-after", "--progress", "never"],
  "after, --progress always": ["/tmp/ndfusion-after", "--progress", "always"],
}
rows = []
for qname, q in queries.items():
    for vname, cmd in variants.items():
        times = []
        for i in range(6):
            t = time.perf_counter()
            r = subprocess.run(cmd + ["-q", "--format", "csv", "-c", create, "-c", q], capture_output=True)
            el = time.perf_counter() - t
            assert r.returncode == 0, r.stderr
            if i > 0: times.append(el)
        rows.append((qname, vname, statistics.median(times), r.stdout.decode().strip().splitlines()[-1][:40]))
        print(rows[-1], flush=True)
