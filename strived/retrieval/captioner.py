"""Captions from a vision-language model the user configured (any OpenAI-compatible endpoint that
accepts images): a few frames per video go to the model, which answers one short caption aimed at
what moves (the paper's captioner), stored in the ``captions`` table with source ``vlm:<model>``.
BM25 summaries then include them (`summaries.build_texts`).

The answer is untrusted data: schema-checked, control characters stripped, length-capped, stored as
text and never interpreted. A user's own caption (sidecar file or CSV) is never overwritten.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ..errors import StrivedError
from ..jobs import CancelFn, ProgressFn, check_cancel, report

SYSTEM = (
    "You describe dashcam footage for a search index. You get a few frames of one clip, in time "
    "order, seen from the ego vehicle. In one or two plain sentences say what happens: which road "
    "users are present (class, colour, side), how they and the ego vehicle move (turns, braking, "
    "lane changes, crossings, overtakes, collisions), and the setting (road type, weather, light). "
    "Do not invent what the frames do not show. Answer with JSON only.")
SCHEMA = {"type": "object", "additionalProperties": False, "required": ["caption"],
          "properties": {"caption": {"type": "string", "minLength": 1, "maxLength": 600}}}
MAX_CHARS = 600
_CTRL = re.compile(r"[\x00-\x1f\x7f]+")


@dataclass
class CaptionReport:
    captioned: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # video_id -> why
    failed: dict[str, str] = field(default_factory=dict)  # video_id -> error


def _frames_jpeg(path: str, duration_s: float, n: int, width: int = 448) -> list[bytes]:
    import cv2

    from .embedders import read_frames_at  # lazy: loads numpy

    d = max(duration_s, 0.1)
    times = [d * (k + 0.5) / n for k in range(n)]
    out = []
    for rgb in read_frames_at(path, times):
        h, w = rgb.shape[:2]
        if w > width:
            rgb = cv2.resize(rgb, (width, int(round(h * width / w))), interpolation=cv2.INTER_AREA)
        ok, buf = cv2.imencode(".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 85])
        if ok:
            out.append(buf.tobytes())
    return out


def clean_caption(text: str) -> str:
    return _CTRL.sub(" ", text).strip()[:MAX_CHARS]


def caption_videos(library, llm, *, frames: int = 4, overwrite: bool = False, progress: ProgressFn = None,
                   cancel: CancelFn = None) -> CaptionReport:
    """Caption every video of ``library`` that has a video file and no caption yet (``overwrite``
    re-captions earlier model captions, never a user's). One video's failure (unreadable file,
    endpoint down, invalid answer) is recorded and the others go on."""
    rep = CaptionReport()
    have = library.caption_sources()
    videos = library.list_videos()
    for k, v in enumerate(videos):
        check_cancel(cancel)
        report(progress, "captions", k, len(videos), item=v["id"])
        vid, path = v["id"], v.get("path")
        src = have.get(vid)
        if src is not None and not (overwrite and str(src).startswith("vlm:")):
            rep.skipped[vid] = f"already captioned ({src})"
            continue
        if not path or not os.path.isfile(path):
            rep.skipped[vid] = "no video file"
            continue
        try:
            imgs = _frames_jpeg(path, float(v.get("duration_s") or 0.0), frames)
            if not imgs:
                raise StrivedError("no frame could be decoded")
            ans = llm.complete_json(SYSTEM, f"{len(imgs)} frames of one clip, in time order.", SCHEMA,
                                    stage="caption", images=imgs, max_tokens=200)
        except StrivedError as e:
            rep.failed[vid] = str(e)
            continue
        text = clean_caption(ans["caption"])
        if not text:
            rep.failed[vid] = "empty caption"
            continue
        library.put_captions([(vid, text, f"vlm:{llm.model}")])
        rep.captioned.append(vid)
    report(progress, "captions", len(videos), len(videos))
    return rep
