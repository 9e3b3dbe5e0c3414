"""The welcome screen's "Try the sample", measured whole as a user meets it: a new process starts
the app (offscreen), clicks "Try the sample" on the welcome screen, and the clock stops when the
first search's results are shown. The sample folder is new each run (nothing reused).

    python benchmarks/bench_sample.py [--runs N] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import sys, time
t0 = float(sys.argv[1])
from PySide6.QtCore import QSettings, QTimer, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication
app = QApplication([])
from app.main_window import MainWindow
from app.settings import AppSettings
w = MainWindow(AppSettings(QSettings(sys.argv[3], QSettings.Format.IniFormat)))
w.resize(1280, 800)
w.show()
d = w.show_welcome()
d.sample_dir = sys.argv[2]
out = {}
def done(resp):
    out["s"] = time.time() - t0
    out["hits"] = len(resp.hits)
    app.quit()
w.search_finished.connect(done)
QTimer.singleShot(0, lambda: QTest.mouseClick(d.sample_button, Qt.MouseButton.LeftButton))
QTimer.singleShot(300000, app.quit)
app.exec()
print("RESULT", out.get("s"), out.get("hits"))
"""


def one_run() -> dict:
    with tempfile.TemporaryDirectory(prefix="strived-bench-sample-") as tmp:
        env = dict(os.environ, QT_QPA_PLATFORM=os.environ.get("QT_QPA_PLATFORM", "offscreen"))
        t0 = time.time()
        r = subprocess.run([sys.executable, "-c", CHILD, str(t0), os.path.join(tmp, "sample"),
                            os.path.join(tmp, "settings.ini")], capture_output=True, text=True, env=env,
                           cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), timeout=400)
        line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT")]
        if r.returncode != 0 or not line or line[0].split()[1] == "None":
            raise SystemExit(f"the sample run failed: {r.stderr[-1500:]}")
        _, s, hits = line[0].split()
        return {"seconds_to_first_results": round(float(s), 2), "hits": int(hits)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    runs = [one_run() for _ in range(max(1, args.runs))]
    out = {"runs": runs, "cpu_count": os.cpu_count(),
           "what": "new process: app start, Try the sample (render six clips, import, text index), "
                   "first search shown; sample folder new each run"}
    for r in runs:
        print(f"Try the sample -> first results: {r['seconds_to_first_results']:.1f} s ({r['hits']} hits)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
