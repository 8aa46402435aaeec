"""What a query through the FFI costs before it reads anything (BENCHMARKS.md, "Python's fixed
cost per query"): a query on compare.py's dataset that prunes every chunk, from Python and from
the command line, and from Python again with more functions registered in the session.

datafusion-ffi 54 turns the caller's whole session into a `ForeignSession` at every FFI
`scan` (`FFI_TableProvider`'s `scan_fn_wrapper`): its configuration, and each of its scalar,
aggregate and window functions wrapped for the other side. The slope against the functions
added shows what each costs; the default session holds about 300.

    NDFUSION_CLI=target/release/ndfusion target/python-bench/bin/python python/benches/ffi_scan_cost.py
"""

import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import compare  # noqa: E402

import datafusion  # noqa: E402
import ndfusion  # noqa: E402
import pyarrow as pa  # noqa: E402

PRUNED = "SELECT avg(temp) FROM d WHERE time > '2100-01-01'"
MEMORY = "SELECT avg(x) FROM m"
RUNS = 301
CLI_RUNS = 400


def per_query(ctx, sql):
    """The median of RUNS timed queries after a warm-up, in ms."""
    run = lambda: pa.Table.from_batches(ctx.sql(sql).collect())  # noqa: E731
    run()
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def cli_per_query():
    """The command line's time per pruned query, in ms: CLI_RUNS of them in one process, less
    one (the process, its start and the CREATE), over CLI_RUNS - 1; best of 3 each."""
    create = ["-c", f"CREATE EXTERNAL TABLE d STORED AS ZARR LOCATION '{compare.DATASET}'"]

    def process(n):
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            subprocess.run([str(compare.CLI), "-q", "--format", "csv", *create,
                            *(["-c", PRUNED] * n)], check=True, capture_output=True)
            best = min(best, time.perf_counter() - start)
        return best

    return (process(CLI_RUNS) - process(1)) / (CLI_RUNS - 1) * 1e3


def main():
    ctx = datafusion.SessionContext()
    ctx.register_table("d", ndfusion.ZarrTable(str(compare.DATASET)))
    ctx.register_record_batches("m", [[pa.record_batch({"x": pa.array([1.0, 2.0])})]])
    print(f"command line, pruned query: {cli_per_query():.2f} ms")
    added = 0
    for total in (0, 300, 1000):
        while added < total:
            ctx.register_udf(datafusion.udf(lambda a: a, [pa.float64()], pa.float64(),
                                            "immutable", name=f"extra_{added}"))
            added += 1
        print(f"Python, {total} functions added: pruned query {per_query(ctx, PRUNED):.2f} ms, "
              f"in-memory table {per_query(ctx, MEMORY):.2f} ms", flush=True)


if __name__ == "__main__":
    main()
