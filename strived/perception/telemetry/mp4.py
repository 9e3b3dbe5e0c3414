"""A minimal ISO-BMFF (MP4/MOV) box reader: the movie's creation time and duration, and the sample tables
(moov/trak/mdia/hdlr + minf/stbl: stsd, stts, stsc, stsz, stco/co64, edts/elst) of the tracks asked for."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .base import TelemetryError

MP4_EPOCH_TO_UNIX = 2082844800          # 1904-01-01 -> 1970-01-01, seconds
MAX_MOOV_BYTES = 256 << 20
_MP4_TOP = {b"ftyp", b"moov", b"mdat", b"free", b"skip", b"wide", b"pnot", b"uuid", b"meta", b"moof"}


@dataclass
class TrackInfo:
    handler: str
    fmt: str                  # first sample description's format, e.g. "gpmd", "avc1"
    timescale: int
    times_s: np.ndarray       # sample start on the movie timeline (s)
    durations_s: np.ndarray
    offsets: np.ndarray       # file offsets
    sizes: np.ndarray


@dataclass
class Mp4Info:
    creation_unix: float | None
    duration_s: float
    tracks: list[TrackInfo]


def _boxes(buf, start: int, end: int):
    """Yield (type, payload_start, payload_end) for the boxes in buf[start:end]."""
    o = start
    while o + 8 <= end:
        size, typ = struct.unpack_from(">I4s", buf, o)
        hdr = 8
        if size == 1:
            if o + 16 > end:
                return
            size = struct.unpack_from(">Q", buf, o + 8)[0]
            hdr = 16
        elif size == 0:
            size = end - o
        if size < hdr or o + size > end:
            return
        yield typ, o + hdr, o + size
        o += size


def _child(buf, start, end, typ: bytes):
    for t, s, e in _boxes(buf, start, end):
        if t == typ:
            return s, e
    return None


def _path(buf, start, end, *types: bytes):
    rng = (start, end)
    for t in types:
        rng = _child(buf, rng[0], rng[1], t)
        if rng is None:
            return None
    return rng


def read_mp4_info(path: str | Path, *, want_tables: tuple[str, ...] = ("gpmd",)) -> Mp4Info | None:
    """Movie creation time, duration and the tracks (sample tables for formats in ``want_tables``).

    None when the file is not ISO-BMFF (no known top-level box first) or has no ``moov``."""
    path = Path(path)
    with open(path, "rb") as f:
        size = path.stat().st_size
        head = f.read(16)
        if len(head) < 8 or head[4:8] not in _MP4_TOP:
            return None
        o, moov = 0, None
        while o + 8 <= size:
            f.seek(o)
            h = f.read(16)
            if len(h) < 8:
                break
            bsize, typ = struct.unpack_from(">I4s", h, 0)
            hdr = 8
            if bsize == 1 and len(h) >= 16:
                bsize, hdr = struct.unpack_from(">Q", h, 8)[0], 16
            elif bsize == 0:
                bsize = size - o
            if bsize < hdr:
                break
            if typ == b"moov":
                if bsize > MAX_MOOV_BYTES:
                    raise TelemetryError(f"moov box too large ({bsize} bytes)")
                f.seek(o)
                moov = f.read(bsize)
                break
            o += bsize
    if moov is None or len(moov) < 8:
        return None
    hdr = 16 if struct.unpack_from(">I", moov, 0)[0] == 1 else 8
    buf, end = moov, len(moov)
    creation, duration_s, movie_ts = None, 0.0, 0
    mvhd = _child(buf, hdr, end, b"mvhd")
    if mvhd:
        s = mvhd[0]
        ver = buf[s]
        if ver == 1:
            ct, _, movie_ts, dur = struct.unpack_from(">QQIQ", buf, s + 4)
        else:
            ct, _, movie_ts, dur = struct.unpack_from(">IIII", buf, s + 4)
        unix = ct - MP4_EPOCH_TO_UNIX
        creation = float(unix) if 946684800 < unix < 4102444800 else None  # 2000..2100, else unset
        duration_s = dur / movie_ts if movie_ts else 0.0
    tracks = []
    for t, s, e in _boxes(buf, hdr, end):
        if t != b"trak":
            continue
        tr = _read_trak(buf, s, e, movie_ts, want_tables)
        if tr is not None:
            tracks.append(tr)
    return Mp4Info(creation, duration_s, tracks)


def _read_trak(buf, s, e, movie_ts: int, want: tuple[str, ...]) -> TrackInfo | None:
    mdia = _child(buf, s, e, b"mdia")
    if mdia is None:
        return None
    mdhd = _child(buf, *mdia, b"mdhd")
    hdlr = _child(buf, *mdia, b"hdlr")
    stbl = _path(buf, mdia[0], mdia[1], b"minf", b"stbl")
    if mdhd is None or hdlr is None or stbl is None:
        return None
    ver = buf[mdhd[0]]
    timescale = struct.unpack_from(">I", buf, mdhd[0] + (20 if ver == 1 else 12))[0]
    handler = bytes(buf[hdlr[0] + 8:hdlr[0] + 12]).decode("latin-1")
    stsd = _child(buf, *stbl, b"stsd")
    fmt = ""
    if stsd and stsd[1] - stsd[0] >= 16:
        fmt = bytes(buf[stsd[0] + 12:stsd[0] + 16]).decode("latin-1")
    empty = np.zeros(0)
    if fmt not in want or not timescale:
        return TrackInfo(handler, fmt, timescale, empty, empty, empty.astype(np.int64), empty.astype(np.int64))

    def full(typ):  # payload after version/flags
        r = _child(buf, *stbl, typ)
        return (r[0] + 4, r[1]) if r else None

    stts, stsz, stsc = full(b"stts"), full(b"stsz"), full(b"stsc")
    stco, co64 = full(b"stco"), full(b"co64")
    if stts is None or stsz is None or stsc is None or (stco is None and co64 is None):
        raise TelemetryError(f"track '{fmt}': incomplete sample table")
    n = struct.unpack_from(">I", buf, stts[0])[0]
    a = np.frombuffer(buf, ">u4", 2 * n, stts[0] + 4).reshape(n, 2).astype(np.int64)
    deltas = np.repeat(a[:, 1], a[:, 0])
    fixed, count = struct.unpack_from(">II", buf, stsz[0])
    sizes = np.full(count, fixed, np.int64) if fixed else np.frombuffer(buf, ">u4", count, stsz[0] + 8).astype(np.int64)
    if co64 is not None:
        nc = struct.unpack_from(">I", buf, co64[0])[0]
        chunk_off = np.frombuffer(buf, ">u8", nc, co64[0] + 4).astype(np.int64)
    else:
        nc = struct.unpack_from(">I", buf, stco[0])[0]
        chunk_off = np.frombuffer(buf, ">u4", nc, stco[0] + 4).astype(np.int64)
    ns = struct.unpack_from(">I", buf, stsc[0])[0]
    sc = np.frombuffer(buf, ">u4", 3 * ns, stsc[0] + 4).reshape(ns, 3).astype(np.int64)
    first = np.append(sc[:, 0], nc + 1)
    per_chunk = np.repeat(sc[:, 1], np.clip(np.diff(first), 0, None))[:nc]
    if per_chunk.sum() < count or len(deltas) < count:
        raise TelemetryError(f"track '{fmt}': sample table inconsistent")
    chunk_of = np.repeat(np.arange(nc), per_chunk)[:count]
    csize = np.concatenate(([0], np.cumsum(sizes)))
    chunk_first = np.concatenate(([0], np.cumsum(per_chunk)))[:nc]
    offsets = chunk_off[chunk_of] + csize[:count] - csize[chunk_first[chunk_of]]
    deltas = deltas[:count]
    t_media = np.concatenate(([0], np.cumsum(deltas)[:-1])) / timescale
    # edit list: leading empty edits delay the track; a media_time > 0 skips that much media
    delay, skip = 0.0, 0.0
    elst = _path(buf, s, e, b"edts", b"elst")
    if elst and movie_ts:
        ev = buf[elst[0]]
        ne = struct.unpack_from(">I", buf, elst[0] + 4)[0]
        o = elst[0] + 8
        for _ in range(ne):
            if ev == 1:
                seg, mt = struct.unpack_from(">Qq", buf, o)
                o += 20
            else:
                seg, mt = struct.unpack_from(">Ii", buf, o)
                o += 12
            if mt == -1:
                delay += seg / movie_ts
            else:
                skip = mt / timescale
                break
    return TrackInfo(handler, fmt, timescale, t_media - skip + delay, deltas / timescale, offsets, sizes)
