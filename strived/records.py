"""Per-frame records: the `strived.records/1` interchange format (docs/formats.md section 1).

In memory a video's records are column arrays, not a list of dicts: one `Track` per tracked object
with float32 arrays per field (NaN = missing) and positions into the video's sampled frame list.
`from_json_dict`/`to_json_dict` convert to and from the file format exactly; malformed input raises
`RecordsError` naming the file, the frame and the key.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from .errors import RecordsError
from .safepaths import video_id_problem

FORMAT = "strived.records/1"
OBJECT_FIELDS = ("distance", "loc_x", "loc_z", "lane_rel", "bbox_area", "score")
EGO_FIELDS = ("speed", "yaw_rate", "accel", "jolt", "speed_conf")
# jolt: sudden global image motion (impact / hard bump), rad/s of unexpected camera rotation
# (see perception/ego/); speed_conf: 0..1 confidence of the speed value (perceived video).
# Both are optional in files (richer than the minimal format's three keys, which every reader accepts).
KNOWN_CLASSES = ("car", "truck", "bus", "pedestrian", "motorcycle", "bicycle", "barrier",
                 "traffic_cone", "other")
INT_FIELDS = ("lane_rel",)


@dataclass
class VideoInfo:
    """What is known about the video a records set describes."""

    id: str
    path: str | None
    fps: float
    n_frames: int
    width: int | None = None
    height: int | None = None
    source: str | None = None
    attrs: dict = field(default_factory=dict)


@dataclass
class Track:
    """One tracked object: per-sample field arrays aligned with ``pos`` (positions into the video's
    sampled-frame arrays ``VideoRecords.t`` / ``frame_idx``)."""

    track_id: int
    cls: str
    pos: np.ndarray
    fields: dict[str, np.ndarray]
    bbox: np.ndarray | None = None
    attrs: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.pos.shape[0])


@dataclass
class VideoRecords:
    """The records of one video: sampled frames (index + time), ego series and tracks."""

    info: VideoInfo
    frame_idx: np.ndarray
    t: np.ndarray
    ego: dict[str, np.ndarray]
    tracks: list[Track]

    def __post_init__(self):
        # an ego field nobody estimated is all-NaN ("unknown"), never absent and never zero
        n = len(self.t)
        for k in EGO_FIELDS:
            if k not in self.ego or self.ego[k] is None:
                self.ego[k] = np.full(n, np.nan)

    @property
    def duration_s(self) -> float:
        return float(self.t[-1] - self.t[0]) if len(self.t) > 1 else 0.0

    def track(self, track_id: int) -> Track:
        for tr in self.tracks:
            if tr.track_id == track_id:
                return tr
        raise KeyError(track_id)

    def problem(self) -> str | None:
        """Why these arrays cannot be one video's records (lengths that disagree, a track sample
        outside the sampled frames, a repeated track id...), or None. Records built from a file
        are consistent by construction; this checks ones read back from a damaged library."""
        n = len(self.t)
        if not isinstance(self.info.id, str) or not self.info.id:
            return f"its id {self.info.id!r} is not a video id"
        if not (isinstance(self.info.fps, (int, float)) and self.info.fps > 0):
            return f"fps {self.info.fps!r} is not a positive number"
        if len(self.frame_idx) != n:
            return f"{len(self.frame_idx)} frame indices for {n} sample times"
        if n and (not np.all(np.isfinite(self.t)) or np.any(np.diff(self.t) < 0)):
            return "sample times that are not finite and increasing"
        bad = [k for k in EGO_FIELDS if len(self.ego[k]) != n or np.isinf(self.ego[k]).any()]
        if bad:
            return f"ego {bad[0]}: {len(self.ego[bad[0]])} values for {n} samples, or infinite ones"
        try:
            _check_span(self.info, self.t, None)
        except RecordsError as e:
            return str(e)
        seen: set[int] = set()
        for tr in self.tracks:
            m = len(tr.pos)
            if tr.track_id in seen or not isinstance(tr.cls, str) or not tr.cls:
                return f"track {tr.track_id}: repeated, or without a class"
            seen.add(tr.track_id)
            if m == 0 or int(tr.pos.min()) < 0 or int(tr.pos.max()) >= n or np.any(np.diff(tr.pos) <= 0):
                return f"track {tr.track_id}: its {m} samples are not increasing positions in 0..{n - 1}"
            bad = [f for f in OBJECT_FIELDS if len(tr.fields.get(f, ())) != m or np.isinf(tr.fields[f]).any()]
            if bad or (tr.bbox is not None and tr.bbox.shape != (m, 4)):
                return (f"track {tr.track_id}: {(bad or ['bbox'])[0]} does not have its {m} samples, "
                        "or has infinite ones")
        return None

    # ------------------------------------------------------------------ file format
    @classmethod
    def load(cls, path: str | os.PathLike) -> "VideoRecords":
        """Read a `strived.records/1` JSON file. Raises RecordsError on malformed content."""
        p = Path(path)
        try:
            with open(p, "r", encoding="utf-8") as fh:
                _check_file_size(p, fh)
                text = fh.read()
            d = json.loads(text)
            if "\\ud" in text.lower():   # an escaped surrogate: a lone one is no Unicode text
                json.dumps(d, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise RecordsError("contains text that is not valid Unicode (a lone surrogate escape such as "
                               "\\udcff)", path=str(p)) from None
        except json.JSONDecodeError as e:
            raise RecordsError(f"not valid JSON (line {e.lineno}, column {e.colno}): {e.msg}",
                               path=str(p)) from None
        except UnicodeDecodeError:
            raise RecordsError("not a UTF-8 text file", path=str(p)) from None
        except OSError as e:
            raise RecordsError(f"cannot read: {e.strerror}", path=str(p)) from None
        return cls.from_json_dict(d, source_path=str(p))

    def save(self, path: str | os.PathLike) -> None:
        """Write atomically (temp file + rename), so a crash never leaves half a file."""
        p = Path(path)
        tmp = p.with_name(p.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(self.to_json_dict(), fh, separators=(",", ":"))
        os.replace(tmp, p)

    @classmethod
    def from_json_dict(cls, d: Any, source_path: str | None = None) -> "VideoRecords":
        """Validate and convert a parsed records document."""
        P = source_path
        if not isinstance(d, dict):
            raise RecordsError("top level must be a JSON object", path=P)
        if d.get("format") != FORMAT:
            raise RecordsError(f"expected \"format\": \"{FORMAT}\", found {d.get('format')!r}",
                               path=P, key="format")
        v = d.get("video")
        if not isinstance(v, dict):
            raise RecordsError("missing or non-object \"video\"", path=P, key="video")
        for k in ("id", "fps", "n_frames"):
            if k not in v or v[k] is None:
                raise RecordsError("missing required key", path=P, key=f"video.{k}")
        vid = v["id"]
        if not isinstance(vid, str) or not vid.strip():
            raise RecordsError("must be a non-empty string", path=P, key="video.id")

        why = video_id_problem(vid)
        if why:
            raise RecordsError(f"{vid!r} {why}", path=P, key="video.id")
        fps = _num(v["fps"], P, None, "video.fps")
        if not fps > 0:
            raise RecordsError(f"must be > 0, found {fps}", path=P, key="video.fps")
        n_frames = v["n_frames"]
        if isinstance(n_frames, bool) or not isinstance(n_frames, int) or n_frames < 0:
            raise RecordsError(f"must be a non-negative integer, found {n_frames!r}", path=P,
                               key="video.n_frames")
        vpath = v.get("path")
        if vpath is not None and not isinstance(vpath, str):
            raise RecordsError("must be a string or null", path=P, key="video.path")
        if vpath and source_path and not os.path.isabs(vpath):
            vpath = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(source_path)), vpath))
        info = VideoInfo(id=vid, path=vpath, fps=float(fps), n_frames=n_frames,
                         width=_opt_int(v.get("width"), P, "video.width"),
                         height=_opt_int(v.get("height"), P, "video.height"),
                         source=v.get("source") if isinstance(v.get("source"), str) else None,
                         attrs=dict(v.get("attrs") or {}) if isinstance(v.get("attrs"), dict) else {})
        frames = d.get("frames")
        if not isinstance(frames, list):
            raise RecordsError("missing or non-list \"frames\"", path=P, key="frames")
        return cls.from_frames(info, frames, source_path=P)

    @classmethod
    def from_frames(cls, info: VideoInfo, frames: list, source_path: str | None = None,
                    track_attrs: dict[int, dict] | None = None) -> "VideoRecords":
        """Build column arrays from a docs/formats.md ``frames`` list (validated)."""
        P = source_path
        n = len(frames)
        frame_idx = np.zeros(n, np.int64)
        t = np.zeros(n, np.float64)
        ego = {k: np.full(n, np.nan) for k in EGO_FIELDS}
        per_track: dict[int, dict] = {}
        prev_t = -math.inf
        prev_i = -1
        for j, fr in enumerate(frames):
            i, tt = _frame_clock(fr, j, P, prev_i, prev_t)
            prev_t, prev_i = tt, i
            frame_idx[j], t[j] = i, tt
            _frame_ego(fr, j, P, ego)
            _frame_objects(fr, j, P, per_track, info)
        _check_span(info, t, P)
        return cls(info=info, frame_idx=frame_idx, t=t, ego=ego, tracks=_tracks_of(per_track, track_attrs))

    def to_json_dict(self) -> dict:
        """The exact `strived.records/1` document (optional keys written when known)."""
        v = self.info
        video = {"id": v.id, "path": v.path, "fps": v.fps, "n_frames": v.n_frames,
                 "width": v.width, "height": v.height, "source": v.source}
        if v.attrs:
            video["attrs"] = v.attrs
        n = len(self.t)
        objs_per_frame: list[list[dict]] = [[] for _ in range(n)]
        for tr in self.tracks:
            for k, p in enumerate(tr.pos.tolist()):
                o: dict[str, Any] = {"track": tr.track_id, "cls": tr.cls}
                if tr.bbox is not None and not np.isnan(tr.bbox[k]).any():
                    o["bbox"] = [_py(x) for x in tr.bbox[k]]
                for f in OBJECT_FIELDS:
                    val = tr.fields[f][k]
                    if not np.isnan(val):
                        o[f] = int(round(float(val))) if f in INT_FIELDS else _py(val)
                if tr.attrs and k == 0:
                    o["attrs"] = tr.attrs
                objs_per_frame[p].append(o)
        frames = []
        for j in range(n):
            fr: dict[str, Any] = {"i": int(self.frame_idx[j]), "t": float(self.t[j])}
            e = {k: float(self.ego[k][j]) for k in EGO_FIELDS if not np.isnan(self.ego[k][j])}
            if e:
                fr["ego"] = e
            fr["objects"] = objs_per_frame[j]
            frames.append(fr)
        return {"format": FORMAT, "video": video, "frames": frames}


#: The frames' time span may exceed the video's length (n_frames / fps) by this factor plus
#: SPAN_SLACK_S: container frame rates are averages (variable-rate phone video) and time stamps
#: may start late; anything beyond is another unit or a sentinel, never a real clip.
SPAN_FACTOR = 1.5
SPAN_SLACK_S = 2.0


#: Bounds on one records file, checked before work is sized by it (issue 37: a file of 1,000,000
#: tracks, 129 MB, took 4.9 GB to import and its text index ran for minutes). The largest real
#: file here (a 16 s clip, 103 tracks) is 1.2 MB. Raised by the environment variables.
MAX_RECORDS_MB, RECORDS_MB_ENV = 64, "STRIVED_MAX_RECORDS_MB"
MAX_TRACKS, TRACKS_ENV = 20_000, "STRIVED_MAX_TRACKS"


def _env_cap(name: str, default: int) -> int:
    try:
        return max(1, int(os.environ.get(name, default)))
    except ValueError:
        return default


def max_tracks() -> int:
    """The most tracks one video's records may hold."""
    return _env_cap(TRACKS_ENV, MAX_TRACKS)


def _check_file_size(path: Path, fh) -> None:
    """Refuse a records file over the size limit before reading it, naming its video (read from
    the file's first bytes, where the ``video`` object is written)."""
    import re

    cap = _env_cap(RECORDS_MB_ENV, MAX_RECORDS_MB)
    size = os.fstat(fh.fileno()).st_size
    if size <= cap * 1_000_000:
        return
    head = os.pread(fh.fileno(), 65536, 0).decode("utf-8", errors="replace")
    m = re.search(r'"id"\s*:\s*"((?:[^"\\]|\\.){1,200})"', head)
    who = f"video {m.group(1)!r}" if m else "its video"
    raise RecordsError(f"the file is {size / 1e6:.0f} MB, over the {cap} MB limit of one records file "
                       f"({who}); nothing was read. Split the video into shorter clips, or set "
                       f"{RECORDS_MB_ENV} to raise the limit", path=str(path))


#: the largest track id a records file may use (a 32-bit id; larger ones are refused, not wrapped)
MAX_TRACK_ID = 2**31 - 1


def _check_span(info: "VideoInfo", t: np.ndarray, path) -> None:
    """Refuse frames whose time span cannot belong to a video of ``info.n_frames`` frames at
    ``info.fps`` (issue 37: one t of 1e9 made every later command of the library run out of
    memory). Work sized by time (text segments, windows) is then bounded by the clip."""
    if len(t) < 2:
        return
    span = float(t[-1] - t[0])
    length = max(info.n_frames, len(t)) / info.fps
    if span > SPAN_FACTOR * length + SPAN_SLACK_S:
        raise RecordsError(f"the frames span {span:.6g} s but the video is {length:.6g} s long "
                           f"({max(info.n_frames, len(t))} frames at {info.fps:g} fps): a time stamp in "
                           f"other units, or a sentinel? (first t = {float(t[0]):.6g}, last t = "
                           f"{float(t[-1]):.6g})", path=path, key="frames")


def iter_records_files(path: str | os.PathLike) -> Iterable[Path]:
    """A records file, or every ``*.json`` under a folder (sorted)."""
    p = Path(path)
    if p.is_dir():
        yield from sorted(q for q in p.rglob("*.json") if q.is_file())
    else:
        yield p


def _py(x) -> float:
    # float32 -> shortest decimal that round-trips to the same float32
    return float(np.format_float_positional(np.float32(x), unique=True, trim="-"))


def _num(x, path, frame, key) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise RecordsError(f"must be a number, found {x!r}", path=path, frame=frame, key=key)
    return float(x)


def _finite_or_error(x, path, frame, key) -> float:
    val = _num(x, path, frame, key)
    if not math.isfinite(val):
        raise RecordsError(f"must be a finite number, found {x!r}", path=path, frame=frame, key=key)
    return val


def _opt_int(x, path, key) -> int | None:
    if x is None:
        return None
    if isinstance(x, bool) or not isinstance(x, (int, float)) or x < 0:
        raise RecordsError(f"must be a non-negative integer or null, found {x!r}", path=path, key=key)
    return int(x)


# ------------------------------------------------------------------ `VideoRecords.from_frames`, per frame
def _frame_clock(fr, j: int, P, prev_i: int, prev_t: float) -> tuple[int, float]:
    """Frame ``j``'s index ``i`` and time ``t``, checked: both increase from frame to frame."""
    if not isinstance(fr, dict):
        raise RecordsError("frame must be an object", path=P, frame=j)
    if "i" not in fr:
        raise RecordsError("missing required key", path=P, frame=j, key="i")
    if "t" not in fr:
        raise RecordsError("missing required key", path=P, frame=j, key="t")
    i = fr["i"]
    if isinstance(i, bool) or not isinstance(i, int) or i < 0:
        raise RecordsError(f"must be a non-negative integer, found {i!r}", path=P, frame=j, key="i")
    tt = _num(fr["t"], P, j, "t")
    if not math.isfinite(tt):
        raise RecordsError(f"must be finite, found {tt}", path=P, frame=j, key="t")
    if tt <= prev_t or i <= prev_i:
        raise RecordsError(f"frames must be in increasing order of i and t (previous i={prev_i}, "
                           f"t={prev_t}; this i={i}, t={tt})", path=P, frame=j, key="t")
    return i, tt


def _frame_ego(fr: dict, j: int, P, ego: dict[str, np.ndarray]) -> None:
    """Frame ``j``'s ego values into the ``ego`` columns (absent: NaN)."""
    e = fr.get("ego")
    if e is not None:
        if not isinstance(e, dict):
            raise RecordsError("must be an object or null", path=P, frame=j, key="ego")
        for k in EGO_FIELDS:
            val = e.get(k)
            if val is not None:
                ego[k][j] = _finite_or_error(val, P, j, f"ego.{k}")


def _frame_objects(fr: dict, j: int, P, per_track: dict[int, dict], info: VideoInfo) -> None:
    """Frame ``j``'s objects, each appended to its track in ``per_track`` (created when new)."""
    objs = fr.get("objects", [])
    if objs is None:
        objs = []
    if not isinstance(objs, list):
        raise RecordsError("must be a list", path=P, frame=j, key="objects")
    seen: set[int] = set()
    for o_i, o in enumerate(objs):
        key0 = f"objects[{o_i}]"
        tid, cls_ = _object_id(o, j, P, key0)
        if tid in seen:
            raise RecordsError(f"track {tid} appears twice in one frame", path=P, frame=j,
                               key=f"{key0}.track")
        seen.add(tid)
        tr = per_track.get(tid)
        if tr is None:
            if len(per_track) >= max_tracks():
                raise RecordsError(f"video {info.id!r} has more than {max_tracks()} tracks, the limit "
                                   f"of one video (set {TRACKS_ENV} to raise it)", path=P, frame=j,
                                   key=f"{key0}.track")
            tr = per_track[tid] = {"cls": cls_, "pos": [], "bbox": [], "has_bbox": False,
                                   **{f: [] for f in OBJECT_FIELDS}, "attrs": {}}
        tr["pos"].append(j)
        for f in OBJECT_FIELDS:
            val = o.get(f)
            tr[f].append(np.nan if val is None else _finite_or_error(val, P, j, f"{key0}.{f}"))
        bb = o.get("bbox")
        if bb is None:
            tr["bbox"].append((np.nan,) * 4)
        else:
            if not isinstance(bb, list) or len(bb) != 4:
                raise RecordsError("must be [x1, y1, x2, y2] or null", path=P, frame=j,
                                   key=f"{key0}.bbox")
            tr["bbox"].append(tuple(_finite_or_error(x, P, j, f"{key0}.bbox") for x in bb))
            tr["has_bbox"] = True
        if isinstance(o.get("attrs"), dict):
            tr["attrs"].update(o["attrs"])


def _object_id(o, j: int, P, key0: str) -> tuple[int, str]:
    """An object's track id and class, checked."""
    if not isinstance(o, dict):
        raise RecordsError("object must be a JSON object", path=P, frame=j, key=key0)
    if "track" not in o:
        raise RecordsError("missing required key", path=P, frame=j, key=f"{key0}.track")
    if "cls" not in o:
        raise RecordsError("missing required key", path=P, frame=j, key=f"{key0}.cls")
    tid = o["track"]
    if isinstance(tid, bool) or not isinstance(tid, int):
        raise RecordsError(f"must be an integer, found {tid!r}", path=P, frame=j, key=f"{key0}.track")
    if not 0 <= tid <= MAX_TRACK_ID:   # -1 means the ego in traces; the store holds int64
        raise RecordsError(f"must be between 0 and {MAX_TRACK_ID}, found {tid}", path=P, frame=j,
                           key=f"{key0}.track")
    cls_ = o["cls"]
    if not isinstance(cls_, str) or not cls_:
        raise RecordsError(f"must be a non-empty string, found {cls_!r}", path=P, frame=j,
                           key=f"{key0}.cls")
    return tid, cls_


def _tracks_of(per_track: dict[int, dict], track_attrs: dict[int, dict] | None) -> list[Track]:
    """The `Track` of each collected track, by track id."""
    tracks = []
    for tid in sorted(per_track):
        tr = per_track[tid]
        attrs = dict(tr["attrs"])
        if track_attrs and tid in track_attrs:
            attrs.update(track_attrs[tid])
        tracks.append(Track(
            track_id=int(tid), cls=tr["cls"], pos=np.asarray(tr["pos"], np.int32),
            fields={f: np.asarray(tr[f], np.float32) for f in OBJECT_FIELDS},
            bbox=np.asarray(tr["bbox"], np.float32).reshape(-1, 4) if tr["has_bbox"] else None,
            attrs=attrs))
    return tracks
