# Issue 43's benchmark sections in one sitting, before and after (BENCHMARKS.md): whole
# `ndfusion` processes of two release builds running the same statements, medians of 5 after
# a warm-up, the peak RSS and minor page faults of one more run (GNU time).
#
#   /tmp/ndfusion-before  a release build of the landing before the first commit
#   /tmp/ndfusion-after   a release build of the commit measured
#
# The data is `benches/icechunk_local.py --generate`'s (xarray 2026.9.0, zarr-python 3.4.2,
# icechunk-python 2.3.0: 1000 days x 100 latitudes x 1000 longitudes of float32, chunks of
# 10 days, zstd; a plain Zarr v3 folder and a local Icechunk repository of the same chunks).
# Sections:
#   local      Icechunk against the plain folder: full scan, 1% time range, box, monthly means
#   s3         the same two stores on SeaweedFS (loopback; the repository's objects uploaded as
#              they are on disk), and the array `temp` alone there and locally
#   xarray     xarray + icechunk-python 2.3 + dask on the local repository (whole processes)
#
#   PYENV_VERSION=3.12.1 python3.12 benches/issue43.py [--only local|s3|xarray] [--runs N]
import os, shutil, socket, statistics, subprocess, sys, tempfile, time

base = "/work/main/target/bench-data"
plain = f"{base}/ic_bench_plain.zarr"
repo = f"{base}/ic_bench.icechunk"
builds = {"before": "/tmp/ndfusion-before", "after": "/tmp/ndfusion-after"}
runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 5
only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None

queries = {
    "full": "SELECT avg(temp) FROM d",
    "1% range": "SELECT avg(temp) FROM d WHERE time < '2000-01-11'",
    "box": "SELECT avg(temp) FROM d WHERE lat > 0 AND lon < 180",
    "monthly means": "SELECT date_trunc('month', time) AS m, avg(temp) FROM d GROUP BY m "
    "ORDER BY m",
}


def run(cmd, measured=False):
    """Seconds, the last line of stdout, and (measured) peak RSS MiB and minor faults."""
    if measured:
        cmd = ["/usr/bin/time", "-f", "%M %R"] + cmd
    start = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True)
    elapsed = time.perf_counter() - start
    assert r.returncode == 0, (cmd, r.stderr.decode()[-2000:])
    last = r.stdout.decode().strip().splitlines()[-1]
    if not measured:
        return elapsed, last, None, None
    rss, faults = r.stderr.decode().strip().splitlines()[-1].split()
    return elapsed, last, int(rss) / 1024, int(faults)


def ndfusion(binary, create, sql):
    return [binary, "-q", "--format", "csv", "-c", create, "-c", sql]


def measure(cmd, n=None):
    n = n or runs
    times = [run(cmd)[0] for _ in range(n + 1)][1:]
    _, answer, rss, faults = run(cmd, measured=True)
    return statistics.median(times), answer, rss, faults


def table(title, names, tables):
    print(f"\n### {title}\n", flush=True)
    print("| query | build | store | median (s) | peak RSS (MiB) | minor faults | answer |")
    print("|---|---|---|---:|---:|---:|---|", flush=True)
    for qname in names:
        sql = queries[qname]
        for build, binary in builds.items():
            for store, create in tables.items():
                t, answer, rss, faults = measure(ndfusion(binary, create, sql))
                print(f"| {qname} | {build} | {store} | {t:.3f} | {rss:.0f} | {faults:,} | "
                      f"{answer[:28]} |", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def seaweedfs(data):
    """SeaweedFS's all-in-one server on free loopback ports, as the tests start it."""
    port = free_port()
    flags = ["master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
             "filer.port", "filer.port.grpc", "s3.port.grpc", "admin.port", "admin.port.grpc"]
    cmd = ["/work/main/target/test-servers/bin/weed", "mini", f"-dir={data}",
           "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-master.telemetry=false",
           "-admin.ui=false", "-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
           f"-s3.port={port}", "-bucket=bench"] + [f"-{f}={free_port()}" for f in flags]
    env = dict(os.environ, AWS_ACCESS_KEY_ID="ndfusion-test",
               AWS_SECRET_ACCESS_KEY="ndfusion-test-secret")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import urllib.request, urllib.error
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/")
        except urllib.error.HTTPError as e:
            if e.code == 403:
                return proc, port
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("SeaweedFS did not start")


def upload(port, folder, prefix):
    import boto3
    s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                      aws_access_key_id="ndfusion-test",
                      aws_secret_access_key="ndfusion-test-secret")
    for _ in range(100):
        try:
            s3.head_bucket(Bucket="bench")
            break
        except Exception:
            time.sleep(0.2)
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            s3.upload_file(path, "bench", f"{prefix}/{os.path.relpath(path, folder)}")


if only in (None, "local"):
    table("Local: Icechunk against the plain folder", list(queries), {
        "plain Zarr": f"CREATE EXTERNAL TABLE d STORED AS ZARR LOCATION '{plain}'",
        "Icechunk": f"CREATE EXTERNAL TABLE d STORED AS ICECHUNK LOCATION '{repo}'",
    })

if only in (None, "s3"):
    data = tempfile.mkdtemp(prefix="issue43-s3-")
    proc, port = seaweedfs(data)
    try:
        upload(port, plain, "plain.zarr")
        upload(port, repo, "ic_bench.icechunk")
        keys = (f"OPTIONS ('aws.endpoint' 'http://127.0.0.1:{port}', 'aws.allow_http' 'true', "
                "'aws.region' 'us-east-1', 'aws.access_key_id' 'ndfusion-test', "
                "'aws.secret_access_key' 'ndfusion-test-secret')")
        table("Loopback S3: Icechunk against the plain folder's objects",
              ["full", "1% range", "box"], {
            "plain Zarr, S3": f"CREATE EXTERNAL TABLE d STORED AS ZARR "
            f"LOCATION 's3://bench/plain.zarr' {keys}",
            "Icechunk, S3": f"CREATE EXTERNAL TABLE d STORED AS ICECHUNK "
            f"LOCATION 's3://bench/ic_bench.icechunk' {keys}",
        })
        # The dataset against its array `temp` alone, on S3 and locally (item 3).
        print("\n### A remote dataset against its local files, and the array alone\n")
        print("| table | query | build | S3 (s) | local (s) | S3 / local |")
        print("|---|---|---|---:|---:|---:|", flush=True)
        for kind, at, column, first_days in [
            ("dataset", "", "temp", "time < '2000-01-11'"),
            ("array `temp`", "/temp", "value", "time < 10"),
        ]:
            for qname, where in [("full", ""), ("1% range", f" WHERE {first_days}")]:
                sql = f"SELECT avg({column}) FROM d{where}"
                for build, binary in builds.items():
                    remote, local = (
                        measure(ndfusion(binary, f"CREATE EXTERNAL TABLE d STORED AS ZARR "
                                         f"LOCATION '{location}'{options}", sql))[0]
                        for location, options in [(f"s3://bench/plain.zarr{at}", f" {keys}"),
                                                  (f"{plain}{at}", "")])
                    print(f"| {kind} | {qname} | {build} | {remote:.4f} | {local:.4f} | "
                          f"{remote / local:.3f} |", flush=True)
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(data, ignore_errors=True)

if only in (None, "xarray"):
    # xarray + icechunk-python + dask (threads: xarray's default scheduler) against ndfusion
    # on the same local repository, whole processes, median of 3 after a warm-up.
    print("\n### xarray + icechunk-python 2.3 + dask on the local repository\n")
    print("| query | xarray + icechunk (s) | ndfusion after (s) | ratio | answers |")
    print("|---|---:|---:|---:|---|", flush=True)
    opening = ("import icechunk, xarray as xr; "
               f"r = icechunk.Repository.open(icechunk.local_filesystem_storage({repo!r})); "
               "ds = xr.open_zarr(r.readonly_session('main').store, consolidated=False); ")
    python = [sys.executable, "-c"]
    for qname, (select, sql) in {
        "full": ("ds.temp", queries["full"]),
        "1% range": ("ds.temp.sel(time=slice(None, '2000-01-10'))", queries["1% range"]),
    }.items():
        theirs, theirs_answer, _, _ = measure(
            python + [opening + f"print(float({select}.mean(dtype='float64')))"], n=3)
        create = f"CREATE EXTERNAL TABLE d STORED AS ICECHUNK LOCATION '{repo}'"
        ours, answer, _, _ = measure(ndfusion(builds["after"], create, sql))
        print(f"| {qname} | {theirs:.3f} | {ours:.3f} | {ours / theirs:.3f} | "
              f"{theirs_answer[:12]} / {answer[:12]} |", flush=True)
