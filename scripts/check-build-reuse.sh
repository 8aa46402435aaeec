#!/usr/bin/env bash
# After `cargo test`, two builds must compile nothing but their own crates, because they use
# the test build's feature set for every dependency (issue 17):
# - `cargo build` (what `cargo run --bin ndfusion` compiles): nothing but ndfusion;
# - the Python extension (`maturin develop`, scripts/python-tests.sh): nothing but ndfusion,
#   the extension and the crates only it uses (pyo3, datafusion-ffi, ...). mimalloc is built
#   with its thread-locals in the dynamic TLS model there, on purpose (python/Cargo.toml).
# Compares the files both builds name for their dependencies (the hash in a file name covers
# its features), so a warm target directory, where both variants may already exist, finds a
# difference as well as a cold one.
set -euo pipefail
cd "$(dirname "$0")/.."
artifacts() {
  cargo "$@" --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact":
        package = m["package_id"].split("#")[-1].rsplit("/", 1)[-1]
        if package.split("@")[0] not in ("ndfusion", "ndfusion-python"):
            for path in m["filenames"]:
                print(package, path.rsplit("/", 1)[-1])
' | sort -u
}
# The packages of $2 that $1 builds too, but from other files.
rebuilt() {
  comm -13 <(echo "$1") <(echo "$2") | cut -d' ' -f1 | sort -u \
    | comm -12 - <(echo "$1" | cut -d' ' -f1 | sort -u)
}
tested=$(artifacts test --no-run)
status=0
others=$(rebuilt "$tested" "$(artifacts build --bins)")
if [ -n "$others" ]; then
  echo "cargo build after cargo test recompiles dependencies:" >&2
  echo "$others" >&2
  status=1
fi
others=$(rebuilt "$tested" "$(artifacts build -p ndfusion-python --lib)" | grep -v '^\(lib\)\?mimalloc\(-sys\)\?@' || true)
if [ -n "$others" ]; then
  echo "the Python extension after cargo test recompiles dependencies (python/Cargo.toml):" >&2
  echo "$others" >&2
  status=1
fi
[ "$status" = 0 ] && echo "cargo build and the Python extension after cargo test: nothing but their own crates recompiled" >&2
exit "$status"
