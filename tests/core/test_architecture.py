"""Architecture contracts: the engine never imports Qt; heavy libraries load lazily."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

WALK = r"""
import importlib, pkgutil, sys
import strived
bad = []
for m in pkgutil.walk_packages(strived.__path__, "strived."):
    if not m.name.endswith("__main__"):
        importlib.import_module(m.name)
qt = sorted(k for k in sys.modules if k.split(".")[0] in ("PySide6", "PyQt5", "PyQt6", "pyqtgraph", "app"))
print("QT", qt)
"""

LAZY = r"""
import sys
import strived.cli, strived.engine, strived.store, strived.rules, strived.evaluation.runner
strived.cli.build_parser()
heavy = sorted(k for k in ("torch", "transformers", "openai", "hnswlib", "cv2", "ray", "xllamacpp", "PySide6")
               if k in sys.modules)
print("HEAVY", heavy)
"""


def _run(code: str) -> str:
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_engine_never_imports_qt():
    out = _run(WALK)
    assert "QT []" in out, out
    for path in (REPO / "strived").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for line in text.splitlines():
            s = line.strip()
            assert not (s.startswith(("import PySide6", "from PySide6", "import pyqtgraph", "from pyqtgraph",
                                      "from app", "import app"))), f"{path}: {s}"


def test_cli_start_imports_no_heavy_library():
    out = _run(LAZY)
    assert "HEAVY []" in out, out
