#!/usr/bin/env bash
# After `cargo test`, `cargo build` (what `cargo run --bin ndfusion` compiles) must compile
# nothing but ndfusion itself: the test build and the normal build use one feature set for
# every dependency (issue 17). Prints what it would recompile and fails if that is more.
set -euo pipefail
cd "$(dirname "$0")/.."
rebuilt=$(cargo build --bins --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and not m.get("fresh"):
        name = m["package_id"].split("#")[-1].split("@")[0].rsplit("/", 1)[-1]
        print(name)
' | sort -u)
others=$(echo "$rebuilt" | grep -v -x -e '' -e 'ndfusion' || true)
if [ -n "$others" ]; then
  echo "cargo build after cargo test recompiled dependencies:" >&2
  echo "$others" >&2
  exit 1
fi
echo "cargo build after cargo test: nothing but ndfusion recompiled" >&2
