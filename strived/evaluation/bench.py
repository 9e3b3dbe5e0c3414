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
    group: str = ""  # the data source the item comes from: folds never split a group
    bench: str = ""  # the benchmark the item belongs to (a mirror's: its original's benchmark)
    mirror_of: str = ""  # the id of the item this one is the left-right mirror of



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


def default_group(item_id: str) -> str:
    """The source of an item whose manifest names no ``group``: its id up to the first ``_``
    (bench-dev's ids start with their source: ``dad_test_pos_000459`` -> ``dad``,
    ``kitti_0005_w01`` -> ``kitti``)."""
    return item_id.split("_", 1)[0]


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
    mirror = man.get("mirror") if isinstance(man.get("mirror"), dict) else {}
    owner = str(mirror.get("of") or man.get("name") or folder.name)
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
        group = v.get("group")
        if group is not None and (not isinstance(group, str) or not group.strip()):
            raise BenchmarkError(f"manifest.json videos[{k}] ({v['id']}): \"group\" must be a non-empty string")
        items.append(BenchItem(v["id"], vid, rec, v.get("source") or "", v.get("license") or "",
                               group or default_group(v["id"]), owner, str(v.get("mirror_of") or "")))
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
    return _restrict(bench, keep, f"{bench.name} [{kind} items]")


def merge_benchmarks(benches: list[Benchmark]) -> Benchmark:
    """One benchmark from several folders (e.g. bench-unseen and bench-dev's held-out sources).

    Item ids must be unique across them. Queries with the same id are one query: their relevant,
    ambiguous and span lists are joined (bench-unseen reuses bench-dev's query ids); a query id
    whose text or event differs between folders is an error. Every item of one folder is a
    non-answer to the queries of another unless listed, as within one folder."""
    if len(benches) == 1:
        return benches[0]
    items, seen = [], {}
    for b in benches:
        for it in b.items:
            if it.id in seen:
                raise BenchmarkError(f"item id {it.id!r} is in both {seen[it.id]} and {b.folder}")
            seen[it.id] = b.folder
            items.append(it)
    queries: dict[str, BenchQuery] = {}
    for b in benches:
        for q in b.queries:
            if q.id not in queries:
                queries[q.id] = BenchQuery(q.id, q.text, list(q.relevant), q.event, dict(q.spans),
                                           list(q.ambiguous))
                continue
            m = queries[q.id]
            if m.text != q.text or m.event != q.event:
                raise BenchmarkError(f"query {q.id} differs between benchmarks ({m.text!r} / {q.text!r})")
            m.relevant += [r for r in q.relevant if r not in m.relevant]
            m.ambiguous += [a for a in q.ambiguous if a not in m.ambiguous]
            m.spans.update(q.spans)
    name = " + ".join(b.name for b in benches)
    return Benchmark(name, benches[0].folder, items, list(queries.values()),
                     "merged: " + "; ".join(b.name for b in benches))


def _restrict(bench: Benchmark, keep: list[BenchItem], name: str) -> Benchmark:
    ids = {it.id for it in keep}
    queries = []
    for q in bench.queries:
        rel = [r for r in q.relevant if r in ids]
        if not rel:
            continue
        queries.append(BenchQuery(q.id, q.text, rel, q.event, {k: v for k, v in q.spans.items() if k in ids},
                                  [a for a in q.ambiguous if a in ids]))
    return Benchmark(name, bench.folder, keep, queries, bench.description)


SPLITS = ("all", "design", "holdout")


def design_holdout(path: str | Path | None = None) -> dict:
    """The design holdout (``resources/design_holdout.json``): which of a benchmark's sources are
    kept out of every design decision and fit. See docs/evaluation.md."""
    p = Path(path) if path else Path(__file__).resolve().parents[2] / "resources" / "design_holdout.json"
    d = _load_json(p)
    if not isinstance(d, dict) or not isinstance(d.get("sources"), list) or not isinstance(d.get("benchmark"), str):
        raise BenchmarkError(f"{p}: expected {{\"benchmark\": NAME, \"sources\": [...]}}")
    return d


def split_benchmark(bench: Benchmark, split: str, holdout: dict | None = None) -> Benchmark:
    """``design``: the holdout's benchmark without its held-out sources (what fits and design
    decisions may read). ``holdout``: its held-out sources plus every item of the other merged
    benchmarks (footage never used for design: bench-unseen). ``all``: unchanged. Items are told
    apart by their group; the holdout names the benchmark by its manifest name."""
    if split == "all":
        return bench
    if split not in SPLITS:
        raise BenchmarkError(f"unknown split {split!r}; valid: {', '.join(SPLITS)}")
    h = holdout or design_holdout()
    held = set(h["sources"])
    own = {it.id for it in bench.items if (it.bench or bench.name) == h["benchmark"]}
    if not own:
        raise BenchmarkError(f"the design holdout is defined on benchmark {h['benchmark']!r}, "
                             "which is not among the folders given")
    if split == "design":
        keep = [it for it in bench.items if it.id in own and it.group not in held]
    else:
        keep = [it for it in bench.items if it.id not in own or it.group in held]
    return _restrict(bench, keep, f"{bench.name} [{split} split]")
