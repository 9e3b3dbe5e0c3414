"""VLM captions through an OpenAI-compatible endpoint (a scripted server on loopback)."""

import json

import cv2
import numpy as np

from strived.llm.client import LLMClient
from strived.llm.config import LLMConfig
from strived.records import VideoInfo, VideoRecords
from strived.retrieval.captioner import caption_videos
from strived.store import Library


def _clip(path, n=30):
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10.0, (160, 96))
    for i in range(n):
        img = np.full((96, 160, 3), 60, np.uint8)
        cv2.rectangle(img, (10 + 3 * i, 40), (40 + 3 * i, 70), (0, 0, 220), -1)
        w.write(img)
    w.release()


def _lib(tmp_path):
    lib = Library.open(tmp_path / "lib", create=True)
    for vid, has_file in (("clip", True), ("records_only", False)):
        path = tmp_path / f"{vid}.mp4"
        if has_file:
            _clip(path)
        t = np.arange(30) / 10.0
        lib.add_video(VideoRecords(VideoInfo(vid, str(path) if has_file else None, 10.0, 30, 160, 96), np.arange(30),
                                   t, {k: np.full(30, np.nan) for k in ("speed", "yaw_rate", "accel")}, []))
    return lib


def test_captions_with_images_are_stored_and_feed_bm25(tmp_path, fake_llm):
    fake_llm.replies = [(200, json.dumps({"caption": "A red truck\x00 cuts in from the right."}), 0.0)]
    client = LLMClient(LLMConfig(base_url=fake_llm.base_url, model="vlm-test", enabled=True),
                       cache=tmp_path / "c.sqlite")
    lib = _lib(tmp_path)
    rep = caption_videos(lib, client, frames=3)
    assert rep.captioned == ["clip"] and "records_only" in rep.skipped
    req = fake_llm.requests[0]
    parts = req["messages"][1]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "image_url", "image_url"]
    assert parts[1]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    text, source = lib.conn.execute("SELECT text, source FROM captions WHERE video_id='clip'").fetchone()
    assert source == "vlm:vlm-test" and "\x00" not in text and "red truck" in text
    # a second run skips what is captioned; the answer is cached anyway
    assert caption_videos(lib, client).captioned == []
    from strived.retrieval import sources
    sources.ensure_text_index(lib, dense=False)
    assert sources.bm25_ranking(lib, "red truck")[0][0] == "clip"
    sources.clear_caches()


def test_down_endpoint_is_reported_per_video(tmp_path, closed_port_url):
    client = LLMClient(LLMConfig(base_url=closed_port_url, model="m", enabled=True, timeout_s=2.0),
                       cache=tmp_path / "c.sqlite")
    lib = _lib(tmp_path)
    rep = caption_videos(lib, client)
    assert list(rep.failed) == ["clip"] and rep.captioned == []
    assert lib.conn.execute("SELECT COUNT(*) FROM captions").fetchone()[0] == 0
