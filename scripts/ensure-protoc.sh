#!/usr/bin/env bash
# Lance's build scripts need protoc: install Debian's protobuf-compiler when it is missing.
set -euo pipefail
if ! command -v protoc >/dev/null 2>&1; then
  echo "protoc not found: installing protobuf-compiler" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq protobuf-compiler >/dev/null
fi
protoc --version >&2
