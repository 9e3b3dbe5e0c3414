"""Detector backends: post-processing, YOLOv3-tiny, a hand-built ONNX model, a tiny HF model."""


import numpy as np
import pytest

from strived.perception.detect import (CLASS_INDEX, COCO80, DEFAULT_DETECTOR, DetectorError, NanoDetDetector,
                                       OnnxYoloDetector, label_map, make_detector, postprocess)
from strived.perception.detect_nanodet import gfl_decode
from strived.perception.detect_yolo import _fixed_tiny_cfg

CAR, PED, BIKE = CLASS_INDEX["car"], CLASS_INDEX["pedestrian"], CLASS_INDEX["bicycle"]


def test_label_map_and_unknown_spec():
    m = label_map(["person", "car", "dog", "motorbike"])
    assert m.tolist() == [PED, CAR, -1, CLASS_INDEX["motorcycle"]]
    with pytest.raises(DetectorError, match="valid"):
        make_detector("magic")


def test_postprocess_nms_nested_and_riders():
    dets = np.array([
        [100, 100, 200, 180, 0.9, CAR],
        [102, 101, 201, 182, 0.5, CAR],                 # duplicate -> NMS
        [80, 90, 230, 200, 0.4, CLASS_INDEX["truck"]],  # nested vehicle box -> dropped
        [400, 100, 440, 200, 0.8, PED],                 # rider over a bicycle -> dropped
        [395, 160, 450, 215, 0.7, BIKE],
        [600, 100, 630, 190, 0.6, PED],                 # a real pedestrian stays
    ], np.float32)
    out = postprocess(dets)
    kinds = sorted((int(r[5]), int(r[0])) for r in out)
    assert kinds == sorted([(CAR, 100), (BIKE, 395), (PED, 600)])


@pytest.fixture(scope="module")
def yolo():
    try:
        return make_detector("yolov3-tiny", device="cpu")
    except DetectorError as e:
        pytest.skip(str(e))


def test_yolov3_tiny_runs_batched(yolo):
    frames = [np.zeros((180, 320, 3), np.uint8), np.full((180, 320, 3), 128, np.uint8)]
    out = yolo.detect(frames)
    assert len(out) == 2 and all(o.shape[1] == 6 and o.dtype == np.float32 for o in out)


def test_yolov3_tiny_finds_cars_on_real_frame(yolo, shared_dir):
    from strived.perception.video import iter_frames

    path = shared_dir / "data" / "bench-dev" / "videos" / "udacity_solidWhiteRight.mp4"
    if not path.exists():
        pytest.skip("bench-dev video missing")
    frame = next(iter_frames(path, 1.0)).image
    dets = yolo.detect([frame])[0]
    assert (dets[:, 5] == CAR).sum() >= 1


# ---------------------------------------------------------------- ONNX, built by hand (no onnx pkg)
def _varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def _field(num, wire, payload):
    key = _varint((num << 3) | wire)
    if wire == 0:
        return key + _varint(payload)
    return key + _varint(len(payload)) + payload


def _value_info(name, dims):
    shape = b"".join(_field(1, 2, _field(1, 0, d)) for d in dims)
    tensor_type = _field(1, 0, 1) + _field(2, 2, shape)
    return _field(1, 2, name.encode()) + _field(2, 2, _field(1, 2, tensor_type))


def _onnx_constant_model(pred: np.ndarray, in_hw=(64, 64)) -> bytes:
    """ModelProto: input 'images' [1,3,H,W]; output = Identity(initializer 'pred')."""
    pred = pred.astype(np.float32)
    tensor = b"".join(_field(1, 0, d) for d in pred.shape) + _field(2, 0, 1) + _field(8, 2, b"pred") + \
        _field(9, 2, pred.tobytes())
    node = _field(1, 2, b"pred") + _field(2, 2, b"output0") + _field(3, 2, b"id") + _field(4, 2, b"Identity")
    graph = (_field(1, 2, node) + _field(2, 2, b"g") + _field(5, 2, tensor)
             + _field(11, 2, _value_info("images", [1, 3, *in_hw]))
             + _field(12, 2, _value_info("output0", list(pred.shape))))
    opset = _field(1, 2, b"") + _field(2, 0, 13)
    return _field(1, 0, 8) + _field(8, 2, opset) + _field(7, 2, graph)


def test_onnx_yolov5_layout_decodes_and_maps_classes(tmp_path):
    pytest.importorskip("onnxruntime")
    n_cls = len(COCO80)
    pred = np.zeros((1, 3, 5 + n_cls), np.float32)
    pred[0, 0, :5] = [32, 32, 16, 16, 0.9]; pred[0, 0, 5 + COCO80.index("car")] = 1.0
    pred[0, 1, :5] = [10, 40, 8, 16, 0.8]; pred[0, 1, 5 + COCO80.index("person")] = 0.9
    pred[0, 2, :5] = [50, 10, 8, 8, 0.9]; pred[0, 2, 5 + COCO80.index("dog")] = 1.0  # dropped
    path = tmp_path / "m.onnx"
    path.write_bytes(_onnx_constant_model(pred))
    det = OnnxYoloDetector(path, device="cpu")
    assert det.size_wh == (64, 64)
    frame = np.zeros((64, 128, 3), np.uint8)  # letterboxed: scale 0.5, pad 16 px top and bottom
    out = det.detect([frame])[0]
    assert sorted(out[:, 5].astype(int).tolist()) == sorted([CAR, PED])
    car = out[out[:, 5] == CAR][0]
    np.testing.assert_allclose(car[:4], [(24) * 2, (24 - 16) * 2, (40) * 2, (40 - 16) * 2], atol=1e-3)


def test_onnx_yolov8_layout(tmp_path):
    pytest.importorskip("onnxruntime")
    n_cls = len(COCO80)
    pred = np.zeros((1, 4 + n_cls, 2), np.float32)
    pred[0, :4, 0] = [32, 32, 20, 10]; pred[0, 4 + COCO80.index("bus"), 0] = 0.7
    path = tmp_path / "v8.onnx"
    path.write_bytes(_onnx_constant_model(pred))
    out = make_detector(f"onnx:{path}", device="cpu").detect([np.zeros((64, 64, 3), np.uint8)])[0]
    assert out.shape == (1, 6) and int(out[0, 5]) == CLASS_INDEX["bus"]


def test_onnx_missing_file():
    pytest.importorskip("onnxruntime")
    with pytest.raises(DetectorError, match="not found"):
        make_detector("onnx:/nonexistent/model.onnx")


def test_hf_tiny_yolos_from_local_folder(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("torch")
    import json

    from transformers import YolosConfig, YolosForObjectDetection

    id2label = {0: "person", 1: "car", 2: "dog"}
    cfg = YolosConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37,
                      image_size=[64, 64], patch_size=16, num_detection_tokens=5, id2label=id2label,
                      label2id={v: k for k, v in id2label.items()})
    YolosForObjectDetection(cfg).save_pretrained(tmp_path)
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "YolosImageProcessor", "size": {"shortest_edge": 64, "longest_edge": 96},
        "image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225]}))
    det = make_detector(f"hf:{tmp_path}", device="cpu", score_threshold=0.0)
    out = det.detect([np.zeros((48, 64, 3), np.uint8), np.zeros((48, 64, 3), np.uint8)])
    assert len(out) == 2
    for o in out:
        assert o.shape[1] == 6
        assert set(o[:, 5].astype(int).tolist()) <= {CLASS_INDEX["pedestrian"], CAR}  # 'dog' dropped
        assert (o[:, [0, 2]] <= 63.001).all() and (o[:, [1, 3]] <= 47.001).all()
    with pytest.raises(DetectorError, match="config.json"):
        make_detector(f"hf:{tmp_path / 'missing'}")


def test_detector_spec_for_a_user_model_path(tmp_path):
    from strived.perception.detect import DetectorError, detector_spec_for_path

    assert detector_spec_for_path("") == DEFAULT_DETECTOR
    (tmp_path / "m.onnx").write_bytes(b"")
    assert detector_spec_for_path(str(tmp_path / "m.onnx")) == f"onnx:{tmp_path / 'm.onnx'}"
    assert detector_spec_for_path(str(tmp_path)) == f"hf:{tmp_path}"
    with pytest.raises(DetectorError, match="onnx file or a transformers model folder"):
        detector_spec_for_path(str(tmp_path / "weights.bin"))


def test_postprocess_can_merge_rider_into_cyclist_box():
    dets = np.array([[400, 100, 440, 200, 0.8, PED], [395, 160, 450, 215, 0.7, BIKE]], np.float32)
    merged = postprocess(dets.copy(), riders="merge")
    assert merged.shape == (1, 6) and int(merged[0, 5]) == BIKE
    np.testing.assert_allclose(merged[0, :4], [395, 100, 450, 215])
    dropped = postprocess(dets.copy())
    np.testing.assert_allclose(dropped[0, :4], [395, 160, 450, 215])


def test_yolov3_tiny_cfg_mask_patch_touches_only_the_second_yolo_layer():
    cfg = "[net]\nwidth=416\n[yolo]\nmask = 3,4,5\n[conv]\n[yolo]\nmask = 0,1,2\nanchors = 1,2\n"
    fixed = _fixed_tiny_cfg(cfg)
    assert fixed.count("mask = 3,4,5") == 1 and "mask = 1,2,3" in fixed and "0,1,2" not in fixed
    assert _fixed_tiny_cfg(fixed) == fixed


# ------------------------------------------------------------------------------------- NanoDet-g
def test_gfl_decode_hand_built_tensor():
    """Two stride-8 cells on a 3-wide grid: expectation over 11 bins x stride, centre at (k + 0.5) * stride."""
    n_cls, bins, stride, grid_w = 6, 11, 8, 3
    scores = np.zeros((6, n_cls), np.float32)
    scores[4, 2] = 0.9            # cell 4 = (x 1, y 1): centre (12, 12)
    scores[5, 0] = 0.05           # below threshold: not decoded
    scores[2, 1], scores[2, 3] = 0.4, 0.6  # cell 2 = (x 2, y 0): centre (20, 4); class 3 wins
    reg = np.full((6, 4 * bins), -30.0, np.float32)
    for side, k in enumerate((1, 2, 3, 4)):        # cell 4: one-hot bins -> distances 8, 16, 24, 32
        reg[4, side * bins + k] = 30.0
    for side in range(4):                          # cell 2: half on bin 0, half on bin 2 -> 1 stride
        reg[2, side * bins + 0] = reg[2, side * bins + 2] = 30.0
    out = gfl_decode(scores, reg, stride, grid_w, 0.3, center_offset=0.5)
    out = out[np.argsort(-out[:, 4])]
    assert out.shape == (2, 6)
    np.testing.assert_allclose(out[0], [12 - 8, 12 - 16, 12 + 24, 12 + 32, 0.9, 2], atol=1e-4)
    np.testing.assert_allclose(out[1], [20 - 8, 4 - 8, 20 + 8, 4 + 8, 0.6, 3], atol=1e-4)
    assert gfl_decode(scores[:0], reg[:0], stride, grid_w, 0.3).shape == (0, 6)


@pytest.fixture(scope="module")
def nanodet():
    # the default detector's weights ship in this repository: a failure to load is a defect, not a skip
    return make_detector("nanodet-g", device="cpu")


def test_default_detector_is_nanodet(nanodet):
    assert DEFAULT_DETECTOR == "nanodet-g" and isinstance(nanodet, NanoDetDetector)
    assert nanodet.config["detector"] == "nanodet-g" and nanodet.device == "cpu"


def test_nanodet_runs_batched_on_synthetic_frames(nanodet):
    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 255, (180, 320, 3), dtype=np.uint8), np.zeros((180, 320, 3), np.uint8)]
    nanodet.reset()
    out = nanodet.detect(frames)
    assert len(out) == 2 and all(o.ndim == 2 and o.shape[1] == 6 and o.dtype == np.float32 for o in out)
    nanodet.reset()                            # the same near-pass plan for the frame alone
    single = nanodet.detect(frames[:1])[0]
    np.testing.assert_allclose(single, out[0], atol=1e-3)
    mixed = nanodet.detect([frames[0], np.zeros((100, 90, 3), np.uint8)])     # different sizes
    assert len(mixed) == 2
    for o, f in zip(mixed, [frames[0], np.zeros((100, 90, 3))]):
        assert (o[:, [0, 2]] <= f.shape[1]).all() and (o[:, [1, 3]] <= f.shape[0]).all()
        assert set(o[:, 5].astype(int).tolist()) <= set(range(6))
    w, h = nanodet.input_size(1242, 376)       # frame aspect kept, height padded up to a multiple of 32
    assert w == nanodet.input_width and h % 32 == 0 and h - 32 < 376 * w / 1242 <= h


def test_nanodet_finds_the_van_on_a_real_kitti_frame(nanodet, shared_dir):
    import json

    import cv2

    video = shared_dir / "data" / "egomotion" / "kitti_raw_0005" / "video.mp4"
    records = shared_dir / "data" / "bench-dev" / "records" / "kitti_0000_w00.json"
    if not video.exists() or not records.exists():
        pytest.skip("KITTI clip or records missing")
    cap = cv2.VideoCapture(str(video))
    ok, frame = cap.read()
    cap.release()
    assert ok
    gt = [o for o in json.loads(records.read_text())["frames"][0]["objects"] if o["cls"] == "car"]
    dets = nanodet.detect([frame])[0]
    vehicles = dets[np.isin(dets[:, 5], [CAR, CLASS_INDEX["truck"], CLASS_INDEX["bus"]]) & (dets[:, 4] >= 0.3)]
    from strived.perception.track import iou_matrix

    iou = iou_matrix(np.array([g["bbox"] for g in gt]), vehicles[:, :4])
    assert iou.max() >= 0.6


def test_nanodet_near_pass_finds_a_car_at_contact_range(nanodet, shared_dir):
    """ccd_000838: the sedan crossing the ego's path fills most of the frame at 2.5-3.0 s, just
    before the crash. The 640 px pass misses it (its boxes cannot grow that large); the near pass
    at 320 px finds it, in every frame of the approach, as the pipeline feeds them."""
    from strived.perception.video import iter_frames

    path = shared_dir / "data" / "bench-dev" / "videos" / "ccd_000838.mp4"
    if not path.exists():
        pytest.skip("bench-dev video missing")
    frames = [f.image for f in iter_frames(path, 10.0) if 2.0 <= f.t_s <= 2.95]
    w = frames[0].shape[1]
    fine_only = NanoDetDetector(near_width=0)
    near_det = nanodet                         # the default

    def biggest_car(dets):
        cars = dets[(dets[:, 5] == CAR) & (dets[:, 4] >= 0.3)]
        return float((cars[:, 2] - cars[:, 0]).max()) / w if len(cars) else 0.0

    near_det.reset()
    with_near = [biggest_car(d) for d in near_det.detect(frames[:4]) + near_det.detect(frames[4:])]
    without = [biggest_car(d) for d in fine_only.detect(frames)]
    late = slice(6, None)                      # 2.6-2.9 s: the sedan spans over half the frame
    assert min(with_near[late]) >= 0.5, with_near
    assert sum(v < 0.4 for v in without[late]) >= 3, without   # found at 640 px once in four
    assert fine_only.config["near_width"] == 0 and near_det.config["near_width"] == 320


def test_near_pass_schedule_every_fifth_frame_and_after_a_near_box(monkeypatch):
    det = NanoDetDetector(near_width=320)
    calls = []
    frame = np.zeros((100, 200, 3), np.uint8)
    frames = [frame.copy() for _ in range(12)]
    frames[7][0, 0] = 1                        # the frame whose full pass finds a near box
    near_box = np.array([[10, 10, 150, 90, 0.9, CAR]], np.float32)

    def fake(fr, input_width):
        calls.append(input_width)
        if input_width == det.input_width:
            return [near_box.copy() if f[0, 0, 0] == 1 else np.zeros((0, 6), np.float32) for f in fr]
        return [np.zeros((0, 6), np.float32) for _ in fr]

    monkeypatch.setattr(det, "_detect_at", fake)
    det.reset()
    det.detect(frames[:4])
    det.detect(frames[4:8])
    det.detect(frames[8:])
    assert calls.count(det.near_width) == 4    # frames 0, 5, 8 (after the near box in 7) and 10
    assert calls.count(det.input_width) == 3   # one batched full pass per call
    det.reset()
    calls.clear()
    det.detect(frames[:1])
    assert calls == [det.input_width, det.near_width]


def test_nanodet_missing_model_file(tmp_path):
    with pytest.raises(DetectorError, match="not found"):
        NanoDetDetector(model_path=tmp_path / "nope.onnx")


def test_nanodet_without_onnxruntime_falls_back_to_opencv(nanodet, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "onnxruntime", None)   # import onnxruntime -> ImportError
    cv = NanoDetDetector(model_path=nanodet.model_path)
    assert cv.runtime == "opencv-dnn"
    rng = np.random.default_rng(1)
    frame = (rng.random((200, 360, 3)) * 255).astype(np.uint8)
    frame[60:160, 100:260] = (40, 40, 200)
    a, b = nanodet.detect([frame])[0], cv.detect([frame])[0]
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, atol=0.05)
    x = rng.standard_normal((1, 3, 96, 160)).astype(np.float32)      # raw head outputs agree too
    ra = {o.shape: o for o in map(np.asarray, nanodet._forward(x))}
    rb = {o.shape: o for o in map(np.asarray, cv._forward(x))}
    assert ra.keys() == rb.keys() and len(ra) == 6
    for k in ra:
        np.testing.assert_allclose(ra[k], rb[k], atol=1e-3)


def _postprocess_reference(dets, nms_iou=0.45, vehicle_merge_iou=0.7, contained=0.85):
    """The second pass of postprocess written pair by pair (what the vectorised code must equal)."""
    from strived.perception.boxes import iou_matrix

    def ios(a, b):
        iw = min(a[2], b[2]) - max(a[0], b[0])
        ih = min(a[3], b[3]) - max(a[1], b[1])
        if iw <= 0 or ih <= 0:
            return 0.0
        return float(iw) * float(ih) / max(min(float(a[2] - a[0]) * float(a[3] - a[1]),
                                               float(b[2] - b[0]) * float(b[3] - b[1])), 1e-9)

    keep = []
    for i in range(len(dets)):
        ok = True
        for j in keep:
            iou = iou_matrix(dets[i:i + 1, :4], dets[j:j + 1, :4])[0, 0]
            same = dets[i, 5] == dets[j, 5]
            veh = dets[i, 5] <= 2 and dets[j, 5] <= 2
            if (same and iou >= nms_iou) or (veh and (iou >= vehicle_merge_iou or ios(dets[i], dets[j]) >= contained)):
                ok = False
                break
        if ok:
            keep.append(i)
    return dets[keep]


def test_postprocess_pairwise_rules_equal_reference():
    from strived.perception.detect_base import _nms_per_class

    rng = np.random.default_rng(7)
    for _ in range(150):
        n = int(rng.integers(0, 90))
        xy, wh = rng.uniform(0, 500, (n, 2)), rng.uniform(5, 180, (n, 2))
        d = np.column_stack([xy, xy + wh, rng.uniform(0.05, 1, n), rng.integers(0, 3, n)]).astype(np.float32)
        got = postprocess(d.copy())           # classes 0-2 only: no pedestrians, so no rider step
        d = d[np.argsort(-d[:, 4], kind="stable")]
        want = _postprocess_reference(d[_nms_per_class(d, 0.45)])
        assert got.shape == want.shape and np.array_equal(got, want.astype(np.float32))


def test_perception_runs_the_near_pass_unless_its_config_says_not():
    from strived.perception.pipeline import PerceptionConfig, detector_options

    assert NanoDetDetector.__init__.__kwdefaults__["near_width"] == NanoDetDetector.NEAR_INPUT_WIDTH
    assert detector_options(PerceptionConfig()) == {}
    assert detector_options(PerceptionConfig(near_pass=False)) == {"near_width": 0}
    assert detector_options(PerceptionConfig(near_pass=False, detector="yolov3-tiny")) == {}
    assert PerceptionConfig(near_pass=True).to_dict()["near_pass"] is True   # stored with every video
