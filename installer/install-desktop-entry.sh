#!/bin/sh
# Add STRIVE-D to the desktop menu of the current user (no root needed): the .desktop entry points
# at this folder's launcher, the icon goes to the user's icon theme. Undo: --uninstall
set -e
HERE=$(dirname "$(readlink -f "$0")")
APPS="${XDG_DATA_HOME:-$HOME/.local/share}/applications"
ICONS="${XDG_DATA_HOME:-$HOME/.local/share}/icons/hicolor/256x256/apps"
if [ "$1" = "--uninstall" ]; then
  rm -f "$APPS/strived.desktop" "$ICONS/strived.png"
  echo "removed the STRIVE-D menu entry"
  exit 0
fi
mkdir -p "$APPS" "$ICONS"
cp "$HERE/strived.png" "$ICONS/strived.png"
sed "s|^Exec=.*|Exec=\"$HERE/strived\" %f|" "$HERE/strived.desktop" > "$APPS/strived.desktop"
chmod 644 "$APPS/strived.desktop"
command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database "$APPS" || true
echo "installed $APPS/strived.desktop (launcher: $HERE/strived)"
