"""What `strived check` reports about a dense index folder's contents (above `dense` and
`dense_check`, which it reads): damage that fails its open, videos with unusable vectors, an
unusable HNSW graph."""

from __future__ import annotations

from pathlib import Path

from .dense import DenseIndex, DenseIndexCorrupt, read_manifest


def index_problems(folder: str | Path) -> list[str]:
    """What `strived check` can report about a dense index folder's contents: damage that fails
    its open, videos with unusable vectors, an unusable graph. [] when sound or absent."""
    try:
        meta = read_manifest(folder)
        if meta is None:
            return []
        idx = DenseIndex(Path(folder), meta)
        idx._load()
    except DenseIndexCorrupt as e:
        return [f"the dense index is damaged ({e.reason})"]
    out = [f"dense index: video {v}: {why} (left out of dense search until re-embedded)"
           for v, why in sorted(idx.bad_videos.items())]
    if idx.graph_problem:
        out.append(f"dense index: its HNSW graph is unusable ({idx.graph_problem}); search is exact "
                   "until the next indexing rebuilds it")
    return out
