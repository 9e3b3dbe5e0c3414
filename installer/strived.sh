#!/bin/sh
# STRIVE-D launcher: runs the bundled app from wherever this folder was unpacked.
#   ./strived [LIBRARY]          open the desktop app
#   ./strived --self-test        check the installation (offline) and exit
#   ./strived cli --help         the command-line tool (index, search, export-results, ...)
HERE=$(dirname "$(readlink -f "$0")")
# Qt picks xcb under X11/XWayland; wayland when only Wayland is present; offscreen when asked
if [ -z "$QT_QPA_PLATFORM" ] && [ -z "$DISPLAY" ] && [ -n "$WAYLAND_DISPLAY" ]; then
  export QT_QPA_PLATFORM=wayland
fi
exec "$HERE/strived-bin" "$@"
