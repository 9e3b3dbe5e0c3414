"""Detector backends: post-processing, YOLOv3-tiny, a hand-built ONNX model, a tiny HF model."""


import numpy as np
import pytest

from strived.perception.detect import (CLASS_INDEX, COCO80, DetectorError, OnnxYoloDetector, label_map,
                                       make_detector, postprocess)

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

    assert detector_spec_for_path("") == "yolov3-tiny"
    (tmp_path / "m.onnx").write_bytes(b"")
    assert detector_spec_for_path(str(tmp_path / "m.onnx")) == f"onnx:{tmp_path / 'm.onnx'}"
    assert detector_spec_for_path(str(tmp_path)) == f"hf:{tmp_path}"
    with pytest.raises(DetectorError, match="onnx file or a transformers model folder"):
        detector_spec_for_path(str(tmp_path / "weights.bin"))
