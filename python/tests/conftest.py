"""The loopback S3 server of the Python tests: SeaweedFS 4.48, which `scripts/install-test-servers.sh`
installs (as for the Rust tests), started on 127.0.0.1 with free ports and telemetry off, and
stopped when the tests end."""

import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

# pyarrow's S3 client (which uploads the fixtures) asks no instance metadata service.
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"

ROOT = Path(__file__).resolve().parents[2]
WEED = ROOT / "target" / "test-servers" / "bin" / "weed"
KEY_ID, SECRET, BUCKET = "ndfusion-test", "ndfusion-test-secret", "pytests"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(port):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
    except urllib.error.HTTPError as e:
        return e.code == 403
    except OSError:
        return False
    return False


@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    """The server's endpoint, bucket and the storage options that reach it."""
    if not WEED.exists():
        pytest.fail(f"{WEED} is missing: run scripts/install-test-servers.sh")
    data = tmp_path_factory.mktemp("seaweedfs")
    port = free_port()
    flags = [f"-{flag}={free_port()}" for flag in (
        "master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
        "filer.port.grpc", "s3.port.grpc", "admin.port", "admin.port.grpc",
    )]
    env = dict(os.environ, AWS_ACCESS_KEY_ID=KEY_ID, AWS_SECRET_ACCESS_KEY=SECRET)
    log = open(data / "weed.log", "w")
    server = subprocess.Popen(
        [str(WEED), "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
         "-master.telemetry=false", "-admin.ui=false", "-webdav=false", "-s3.port.iceberg=0",
         "-s3.port.lance=0", f"-s3.port={port}", f"-bucket={BUCKET}", *flags],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while not answers(port):
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"SeaweedFS did not start: {(data / 'weed.log').read_text()[-2000:]}")
            time.sleep(0.2)
        endpoint = f"http://127.0.0.1:{port}"
        yield {
            "endpoint": endpoint,
            "bucket": BUCKET,
            "options": {
                "aws.endpoint": endpoint,
                "aws.allow_http": "true",
                "aws.region": "us-east-1",
                "aws.access_key_id": KEY_ID,
                "aws.secret_access_key": SECRET,
            },
        }
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def upload(s3, local: Path, prefix: str):
    """Copies a local folder to `s3://bucket/prefix` with pyarrow's S3 client."""
    from pyarrow import fs

    remote = fs.S3FileSystem(
        access_key=KEY_ID, secret_key=SECRET, region="us-east-1", scheme="http",
        endpoint_override=s3["endpoint"].removeprefix("http://"), allow_bucket_creation=True,
    )
    fs.copy_files(str(local), f"{s3['bucket']}/{prefix}", destination_filesystem=remote)
