"""A library's drives: consecutive files of one camera joined into one drive timeline
(`strived.drives` finds them; this module keeps them).

Three tables, made on first write (an older library has none and reads as having no drives):

- ``drive_starts``: per video, when its recording started and how that is known (``source``:
  ``name`` = the file name's time stamp, ``container`` = the creation_time tag, ``mtime`` = the
  file's modification time minus its length; ``detail`` says what was read), its length in seconds,
  its camera signature key, and the video's ``rev`` it was read for (a video written again is read
  again; the others are not, so a refresh after indexing stays incremental);
- ``drives``: ``id`` (``drive:`` + the first video's id), ``camera``, ``start_s`` (seconds since the
  epoch on the clock of ``source``), ``source``, ``length_s``, ``n_files``, ``tolerance_s`` (the gap
  allowed between files), ``computed_at``;
- ``drive_files``: ``video_id`` -> ``drive_id``, ``seq`` (0-based order), ``offset_s`` (where the
  file starts in drive time), ``gap_s`` (seconds from the previous file's end; None for the first).

Only drives of two files or more are stored: a file alone is no drive.
"""

from __future__ import annotations

from datetime import datetime, timezone

_DDL = (
    "CREATE TABLE IF NOT EXISTS drive_starts (video_id TEXT PRIMARY KEY, rev INTEGER, path TEXT, "
    "sig_key TEXT, start_s REAL, source TEXT, detail TEXT, length_s REAL)",
    "CREATE TABLE IF NOT EXISTS drives (id TEXT PRIMARY KEY, camera TEXT, start_s REAL, source TEXT, "
    "length_s REAL, n_files INTEGER, tolerance_s REAL, computed_at TEXT)",
    "CREATE TABLE IF NOT EXISTS drive_files (video_id TEXT PRIMARY KEY, drive_id TEXT, seq INTEGER, "
    "offset_s REAL, gap_s REAL)",
    "CREATE INDEX IF NOT EXISTS idx_drive_files_drive ON drive_files(drive_id, seq)",
)
_START_COLS = ("video_id", "rev", "path", "sig_key", "start_s", "source", "detail", "length_s")


def _has(lib, *names: str) -> bool:
    q = f"SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name IN ({','.join('?' * len(names))})"
    return lib.conn.execute(q, names).fetchone()[0] == len(names)


def starts(lib) -> dict[str, dict]:
    """{video_id: its stored start evidence} (keys of ``_START_COLS``)."""
    if not _has(lib, "drive_starts"):
        return {}
    return {r[0]: dict(zip(_START_COLS, r)) for r in lib.conn.execute(
        f"SELECT {', '.join(_START_COLS)} FROM drive_starts")}


def video_revs(lib) -> dict[str, int | None]:
    """{video_id: rev} of every video (a video written again has a new rev)."""
    return dict(lib.conn.execute("SELECT id, rev FROM videos"))


def save(lib, new_starts: list[dict], drives: list[dict], tolerance_s: float) -> None:
    """Store the start evidence read now (``new_starts``) and replace every drive, in one
    transaction; rows of videos gone from the library go too."""
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    with lib.transaction():
        for sql in _DDL:
            lib.conn.execute(sql)
        lib.conn.executemany(
            f"INSERT OR REPLACE INTO drive_starts({', '.join(_START_COLS)}) VALUES "
            f"({','.join('?' * len(_START_COLS))})", [tuple(s.get(k) for k in _START_COLS) for s in new_starts])
        lib.conn.execute("DELETE FROM drive_starts WHERE video_id NOT IN (SELECT id FROM videos)")
        lib.conn.execute("DELETE FROM drives")
        lib.conn.execute("DELETE FROM drive_files")
        for d in drives:
            lib.conn.execute("INSERT INTO drives(id, camera, start_s, source, length_s, n_files, tolerance_s, "
                             "computed_at) VALUES (?,?,?,?,?,?,?,?)",
                             (d["id"], d["camera"], d["start_s"], d["source"], d["length_s"], len(d["files"]),
                              tolerance_s, now))
            lib.conn.executemany("INSERT INTO drive_files(video_id, drive_id, seq, offset_s, gap_s) "
                                 "VALUES (?,?,?,?,?)",
                                 [(f["video_id"], d["id"], k, f["offset_s"], f["gap_s"])
                                  for k, f in enumerate(d["files"])])


def drives(lib) -> list[dict]:
    """Every stored drive (by camera, then start) with its files in order, each with its start
    evidence, offset and gap; [] when none was computed."""
    if not _has(lib, "drives", "drive_files", "drive_starts"):
        return []
    files: dict[str, list] = {}
    for r in lib.conn.execute(
            "SELECT f.drive_id, f.video_id, f.seq, f.offset_s, f.gap_s, s.path, s.start_s, s.source, "
            "s.detail, s.length_s FROM drive_files f LEFT JOIN drive_starts s ON s.video_id = f.video_id "
            "WHERE f.video_id IN (SELECT id FROM videos) ORDER BY f.drive_id, f.seq"):
        files.setdefault(r[0], []).append(dict(zip(
            ("video_id", "seq", "offset_s", "gap_s", "path", "start_s", "source", "detail", "length_s"), r[1:])))
    out = []
    for r in lib.conn.execute("SELECT id, camera, start_s, source, length_s, n_files, tolerance_s, computed_at "
                              "FROM drives ORDER BY camera, start_s, id"):
        d = dict(zip(("id", "camera", "start_s", "source", "length_s", "n_files", "tolerance_s", "computed_at"), r))
        d["files"] = files.get(d["id"], [])
        out.append(d)
    return out


def files_of(lib, video_ids) -> dict[str, dict]:
    """{video_id: drive_id, seq, offset_s, length_s, tolerance_s, path, n_frames, fps} of those of
    ``video_ids`` that belong to a stored drive (a search asks this for its hits)."""
    ids = list(dict.fromkeys(video_ids))
    if not ids or not _has(lib, "drives", "drive_files", "drive_starts"):
        return {}
    out: dict[str, dict] = {}
    keys = ("video_id", "drive_id", "seq", "offset_s", "length_s", "tolerance_s", "path", "n_frames", "fps")
    for k in range(0, len(ids), 500):
        part = ids[k:k + 500]
        for r in lib.conn.execute(
                "SELECT f.video_id, f.drive_id, f.seq, f.offset_s, s.length_s, d.tolerance_s, v.path, "
                "v.n_frames, v.fps FROM drive_files f JOIN drives d ON d.id = f.drive_id "
                "JOIN drive_starts s ON s.video_id = f.video_id JOIN videos v ON v.id = f.video_id "
                f"WHERE f.video_id IN ({','.join('?' * len(part))})", part):
            out[r[0]] = dict(zip(keys, r))
    return out
