"""Draw the STRIVE-D icon: a road in perspective under a magnifying glass (search over dashcam
footage). Writes ``strived.svg`` (the source) and ``strived.png`` (256 px, rendered from the SVG
with Qt) into the given folder. Run: QT_QPA_PLATFORM=offscreen python installer/make_icon.py resources/icons
"""

from __future__ import annotations

import sys
from pathlib import Path

SVG = """<svg xmlns="http://www.w3.org/2000/svg" width="256" height="256" viewBox="0 0 256 256">
  <defs>
    <linearGradient id="sky" x1="0" y1="0" x2="0" y2="1">
      <stop offset="0" stop-color="#1d3557"/><stop offset="1" stop-color="#457b9d"/>
    </linearGradient>
  </defs>
  <rect x="8" y="8" width="240" height="240" rx="44" fill="url(#sky)"/>
  <path d="M 8 150 L 248 150 L 248 204 Q 248 248 204 248 L 52 248 Q 8 248 8 204 Z" fill="#2a9d8f"/>
  <path d="M 112 150 L 144 150 L 226 248 L 30 248 Z" fill="#3d4247"/>
  <path d="M 126 158 L 130 158 L 132 176 L 124 176 Z M 122 190 L 134 190 L 137 216 L 119 216 Z
           M 117 228 L 139 228 L 141 248 L 115 248 Z" fill="#f1faee"/>
  <circle cx="150" cy="96" r="50" fill="#a8dadc" fill-opacity="0.35" stroke="#f1faee" stroke-width="14"/>
  <path d="M 186 132 L 226 172" stroke="#f1faee" stroke-width="22" stroke-linecap="round"/>
  <rect x="128" y="92" width="44" height="22" rx="5" fill="#e63946"/>
  <rect x="134" y="80" width="32" height="14" rx="4" fill="#e63946"/>
  <circle cx="138" cy="116" r="5" fill="#1d1d1d"/><circle cx="162" cy="116" r="5" fill="#1d1d1d"/>
</svg>
"""


def main(out_dir: str) -> int:
    from PySide6.QtCore import QByteArray, Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "strived.svg").write_text(SVG)
    app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])  # noqa: F841
    img = QImage(256, 256, QImage.Format.Format_ARGB32)
    img.fill(Qt.GlobalColor.transparent)
    p = QPainter(img)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    QSvgRenderer(QByteArray(SVG.encode())).render(p)
    p.end()
    if not img.save(str(out / "strived.png")):
        raise OSError(f"cannot write {out / 'strived.png'}")
    print(f"wrote {out / 'strived.svg'} and {out / 'strived.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "resources/icons"))
