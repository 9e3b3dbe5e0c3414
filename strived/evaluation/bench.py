"""Read a retrieval benchmark folder (docs/formats.md section 2) with clear errors."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BenchmarkError


@dataclass
class BenchItem:
    id: str
    video: Path | None
    records: Path | None
    source: str = ""
    license: str = ""


@dataclass
class BenchQuery:
    id: str
    text: str
    relevant: list[str]
    event: str | None = None
    spans: dict[str, list[list[float]]] = field(default_factory=dict)
    ambiguous: list[str] = field(default_factory=list)


@dataclass
class Benchmark:
    name: str
    folder: Path
    items: list[BenchItem]
    queries: list[BenchQuery]
    description: str = ""

    @property
    def item_ids(self) -> list[str]:
        return [i.id for i in self.items]


def _load_json(p: Path):
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BenchmarkError(f"{p} is missing (a benchmark folder needs manifest.json and queries.json)") from None
    except json.JSONDecodeError as e:
        raise BenchmarkError(f"{p}: not valid JSON (line {e.lineno}): {e.msg}") from None


def load_benchmark(folder: str | Path) -> Benchmark:
    folder = Path(folder)
    if not folder.is_dir():
        raise BenchmarkError(f"{folder} is not a folder")
    man = _load_json(folder / "manifest.json")
    if not isinstance(man, dict) or not isinstance(man.get("videos"), list):
        raise BenchmarkError(f"{folder / 'manifest.json'}: expected an object with a \"videos\" list")
    items, seen = [], set()
    for k, v in enumerate(man["videos"]):
        if not isinstance(v, dict) or not isinstance(v.get("id"), str):
            raise BenchmarkError(f"manifest.json videos[{k}]: needs a string \"id\"")
        if v["id"] in seen:
            raise BenchmarkError(f"manifest.json videos[{k}]: duplicate id {v['id']!r}")
        seen.add(v["id"])
        vid = folder / v["video"] if v.get("video") else None
        rec = folder / v["records"] if v.get("records") else None
        if vid is None and rec is None:
            raise BenchmarkError(f"manifest.json videos[{k}] ({v['id']}): has neither video nor records")
        items.append(BenchItem(v["id"], vid, rec, v.get("source") or "", v.get("license") or ""))
    qs = _load_json(folder / "queries.json")
    if not isinstance(qs, list):
        raise BenchmarkError(f"{folder / 'queries.json'}: expected a list of queries")
    queries = []
    for k, q in enumerate(qs):
        if not isinstance(q, dict) or not isinstance(q.get("id"), str) or not isinstance(q.get("text"), str):
            raise BenchmarkError(f"queries.json[{k}]: needs string \"id\" and \"text\"")
        rel = q.get("relevant") or []
        unknown = [r for r in rel + list(q.get("ambiguous") or []) if r not in seen]
        if unknown:
            raise BenchmarkError(f"queries.json[{k}] ({q['id']}): unknown item ids {unknown}")
        queries.append(BenchQuery(q["id"], q["text"], list(rel), q.get("event"),
                                  dict(q.get("spans") or {}), list(q.get("ambiguous") or [])))
    return Benchmark(man.get("name") or folder.name, folder, items, queries, man.get("description") or "")


ITEM_KINDS = ("all", "video", "records")


def subset_benchmark(bench: Benchmark, kind: str) -> Benchmark:
    """The benchmark restricted to its video items (``video``: items with a video file, searched
    through perception) or its track-record items (``records``: items with records only).

    Each query keeps only the relevant/ambiguous items of the subset; a query left with no
    relevant item is dropped (it cannot be scored). ``all`` returns ``bench`` unchanged.
    """
    if kind == "all":
        return bench
    if kind not in ITEM_KINDS:
        raise BenchmarkError(f"unknown item kind {kind!r}; valid: {', '.join(ITEM_KINDS)}")
    keep = [it for it in bench.items if (it.video is not None) == (kind == "video")]
    ids = {it.id for it in keep}
    queries = []
    for q in bench.queries:
        rel = [r for r in q.relevant if r in ids]
        if not rel:
            continue
        queries.append(BenchQuery(q.id, q.text, rel, q.event,
                                  {k: v for k, v in q.spans.items() if k in ids},
                                  [a for a in q.ambiguous if a in ids]))
    return Benchmark(f"{bench.name} [{kind} items]", bench.folder, keep, queries, bench.description)
