"""Python (datafusion-python + ndfusion's extension) against the command line on compare.py's
dataset and queries, alternated query by query in rounds so that the machine's drift falls on
both (BENCHMARKS.md, "Issue 43 in one sitting", the third run). Each cell: medians of 9 from
Python, and the times the CLI prints for 9 statements after a warm-up.

    NDFUSION_CLI=target/release/ndfusion target/python-bench/bin/python python/benches/alternate.py

`--profile QUERY N` runs QUERY (full, range, box, group) N times from Python and nothing else,
for `perf record -F 999 -g` (the CLI's counterpart: the same statement N times with -c).
"""

import re
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import compare  # noqa: E402

import datafusion  # noqa: E402
import ndfusion  # noqa: E402
import pyarrow as pa  # noqa: E402

RUNS = 9
ROUNDS = 3


def context():
    ctx = datafusion.SessionContext()
    ctx.register_table("d", ndfusion.ZarrTable(str(compare.DATASET)))
    return ctx


def main():
    ctx = context()
    if sys.argv[1:2] == ["--profile"]:
        sql = compare.QUERIES[sys.argv[2]][1]
        for _ in range(int(sys.argv[3])):
            pa.Table.from_batches(ctx.sql(sql).collect())
        return
    create = ["-c", f"CREATE EXTERNAL TABLE d STORED AS ZARR LOCATION '{compare.DATASET}'"]
    for rnd in range(ROUNDS):
        line = []
        for key, (_, sql) in compare.QUERIES.items():
            py, _ = compare.median_time(
                lambda: pa.Table.from_batches(ctx.sql(sql).collect()), RUNS)
            text = subprocess.run(
                [str(compare.CLI), "--format", "csv", *create, *(["-c", sql] * (RUNS + 1))],
                check=True, capture_output=True, text=True).stdout
            times = [float(t) for t in re.findall(r"Elapsed ([0-9.]+) seconds", text)][2:]
            cli = statistics.median(times)
            line.append(f"{key} {py:.4f}/{cli:.4f}={py / cli:.2f}")
        print(f"round {rnd + 1}: " + "  ".join(line), flush=True)


if __name__ == "__main__":
    main()
