# Icechunk on loopback S3 (issue 43, the 1% range's goal): the requests a `CREATE` and one
# query make, and the time they take, for two release builds (BENCHMARKS.md, "Icechunk's
# requests on S3"). The data is `benches/icechunk_local.py --generate`'s, uploaded to
# SeaweedFS on 127.0.0.1 as in benches/issue43.py.
#
#   PYENV_VERSION=3.12.1 python3.12 benches/icechunk_requests.py --trace BINARY
#       every request of CREATE + the 1% range, through a logging proxy (its times are the
#       proxy's, not the store's: use them for order, not for speed)
#   PYENV_VERSION=3.12.1 python3.12 benches/icechunk_requests.py --time BEFORE AFTER [--runs N]
#       whole processes, the two builds alternated run by run, medians of N (11)
import http.client
import http.server
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

args = sys.argv[1:]
sys.argv = [sys.argv[0], "--only", "none"]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import issue43 as bench  # noqa: E402  (its SeaweedFS, upload and data paths)

SQL = "SELECT avg(temp) FROM d WHERE time < '2000-01-11'"


def creates(port):
    keys = (f"OPTIONS ('aws.endpoint' 'http://127.0.0.1:{port}', 'aws.allow_http' 'true', "
            "'aws.region' 'us-east-1', 'aws.access_key_id' 'ndfusion-test', "
            "'aws.secret_access_key' 'ndfusion-test-secret')")
    return {
        "plain": f"CREATE EXTERNAL TABLE d STORED AS ZARR LOCATION 's3://bench/plain.zarr' {keys}",
        "icechunk": "CREATE EXTERNAL TABLE d STORED AS ICECHUNK "
        f"LOCATION 's3://bench/ic_bench.icechunk' {keys}",
    }


def command(binary, create, statements):
    return [binary, "-q", "--format", "csv", "-c", create] + [
        a for sql in statements for a in ("-c", sql)]


def trace(binary, port):
    """Runs CREATE + the query through a proxy that logs each request, and prints them."""
    log, t0 = [], [0.0]

    class Proxy(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def forward(self):
            start = time.perf_counter() - t0[0]
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else None
            upstream = http.client.HTTPConnection("127.0.0.1", port)
            upstream.request(self.command, self.path, body=body, headers=dict(self.headers))
            answer = upstream.getresponse()
            data = answer.read()
            log.append((start, self.command, answer.status, self.path,
                        self.headers.get("Range") or "", len(data)))
            self.send_response(answer.status)
            for k, v in answer.getheaders():
                if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = forward

        def log_message(self, *_):
            pass

    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    for name, create in creates(proxy.server_address[1]).items():
        log.clear()
        t0[0] = time.perf_counter()
        subprocess.run(command(binary, create, [SQL]), check=True, capture_output=True)
        print(f"== {name}: {len(log)} requests")
        for start, method, status, path, rng, size in sorted(log):
            print(f"{start * 1000:8.1f} ms  {method} {status} {path} {rng} {size}")
    proxy.shutdown()


def timed(builds, port, runs):
    for what, statements in [("CREATE + 1% range", [SQL]), ("CREATE alone", []),
                             ("CREATE + 10x 1% range", [SQL] * 10)]:
        times = {(b, s): [] for b in builds for s in ("plain", "icechunk")}
        for i in range(runs + 1):
            for build, binary in builds.items():
                for store, create in creates(port).items():
                    start = time.perf_counter()
                    subprocess.run(command(binary, create, statements), check=True,
                                   capture_output=True)
                    if i:  # the first round warms up
                        times[(build, store)].append(time.perf_counter() - start)
        for build in builds:
            plain = statistics.median(times[(build, "plain")])
            ice = statistics.median(times[(build, "icechunk")])
            print(f"| {what} | {build} | {plain * 1000:.1f} | {ice * 1000:.1f} | "
                  f"{ice / plain:.2f} |", flush=True)


data = tempfile.mkdtemp(prefix="icechunk-requests-")
proc, port = bench.seaweedfs(data)
try:
    bench.upload(port, bench.plain, "plain.zarr")
    bench.upload(port, bench.repo, "ic_bench.icechunk")
    if args[0] == "--trace":
        trace(args[1], port)
    else:
        runs = int(args[args.index("--runs") + 1]) if "--runs" in args else 11
        timed({"before": args[1], "after": args[2]}, port, runs)
finally:
    proc.terminate()
    proc.wait()
    shutil.rmtree(data, ignore_errors=True)
