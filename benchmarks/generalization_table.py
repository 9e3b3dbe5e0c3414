"""The generalization table: the same methods under each protocol, from committed eval JSON.

    .venv/bin/python benchmarks/generalization_table.py [--dir docs/report/generalization] [--quality PATH]

Prints a markdown table (mAP / Acc@1 in %) of the committed `strived eval --json` outputs of
``docs/report/generalization/`` (issue 31): the design holdout measured as a user meets it (the
shipped files, ``--cv 0``) at the start and the end of the issue, leave-one-source-out on the
design split, and random 5-fold on bench-dev. README's headline table is this output, and
``tests/core/test_readme_figures.py`` checks that README quotes these files. ``--quality PATH``
also writes the short summary the app's About box shows (``resources/quality.json``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("full", "equal", "rule", "dense", "bm25", "rule-hand")
ROWS = (
    ("holdout_after.json", "**unseen**: design holdout, shipped files (`--cv 0`), end of issue 31"),
    ("holdout_before.json", "unseen: design holdout, shipped files, start of issue 31"),
    ("design_loso.json", "design split, leave one source out (`--cv source`)"),
    ("design_loso_with_mirrors.json", "design split + mirrored clips, leave one source out"),
    ("dev_video_cv5.json", "bench-dev video items, random 5 folds (`--cv 5`)"),
    ("dev_all_cv5.json", "bench-dev all items, random 5 folds (`--cv 5`)"),
)


def cell(res: dict, method: str) -> str:
    m = res["methods"].get(method)
    return "-" if m is None else f"{100 * m['mAP']:.1f} / {100 * m['Acc@1']:.1f}"


def table(folder: Path) -> str:
    lines = ["| protocol | items / queries | " + " | ".join(METHODS) + " |",
             "|---|---|" + "---|" * len(METHODS)]
    for name, label in ROWS:
        p = folder / name
        if not p.exists():
            continue
        res = json.loads(p.read_text())
        lines.append(f"| {label} | {res['n_items']} / {res['n_queries']} | "
                     + " | ".join(cell(res, m) for m in METHODS) + " |")
    return "\n".join(lines)


def quality(folder: Path) -> dict:
    """What the app's About box says about search quality: the unseen figure."""
    res = json.loads((folder / "holdout_after.json").read_text())
    full = res["methods"]["full"]
    return {"format": "strived.quality/1", "source": "docs/report/generalization/holdout_after.json",
            "protocol": "design holdout: real dashcam clips from sources never used to design or fit "
                        "the product (bench-unseen + a third of bench-dev's sources), searched with the "
                        "shipped files",
            "n_items": res["n_items"], "n_queries": res["n_queries"],
            "full_map": round(full["mAP"], 4), "full_acc1": round(full["Acc@1"], 4),
            "full_acc5": round(full["Acc@5"], 4)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=str(ROOT / "docs" / "report" / "generalization"))
    ap.add_argument("--quality", default=None, help="also write the About box summary here")
    args = ap.parse_args(argv)
    print(table(Path(args.dir)))
    if args.quality:
        Path(args.quality).write_text(json.dumps(quality(Path(args.dir)), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
