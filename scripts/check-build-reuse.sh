#!/usr/bin/env bash
# After `cargo test`, `cargo build` (what `cargo run --bin ndfusion` compiles) must compile
# nothing but ndfusion itself: the test build and the normal build use one feature set for
# every dependency (issue 17). Compares the files both builds name for their dependencies
# (the hash in a file name covers its features), so a warm target directory, where both
# variants may already exist, finds a difference as well as a cold one.
set -euo pipefail
cd "$(dirname "$0")/.."
artifacts() {
  cargo "$@" --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact":
        name = m["package_id"].split("#")[-1].split("@")[0].rsplit("/", 1)[-1]
        if name != "ndfusion":
            for path in m["filenames"]:
                print(name, path.rsplit("/", 1)[-1])
' | sort -u
}
tested=$(artifacts test --no-run)
built=$(artifacts build --bins)
others=$(comm -13 <(echo "$tested") <(echo "$built") | cut -d' ' -f1 | sort -u)
if [ -n "$others" ]; then
  echo "cargo build after cargo test recompiles dependencies:" >&2
  echo "$others" >&2
  exit 1
fi
echo "cargo build after cargo test: nothing but ndfusion recompiled" >&2
