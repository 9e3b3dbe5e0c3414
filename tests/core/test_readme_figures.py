"""README's headline figures are the committed source-held-out evaluation, not a copy that drifts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_quotes_the_committed_generalization_table():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "generalization_table.py")],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert "**unseen**" in out
    assert out in (ROOT / "README.md").read_text(encoding="utf-8")


def test_about_box_summary_matches_the_committed_holdout_run():
    import json

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from generalization_table import quality
    finally:
        sys.path.pop(0)
    shipped = json.loads((ROOT / "resources" / "quality.json").read_text())
    assert shipped == quality(ROOT / "docs" / "report" / "generalization")
