"""The detector's fast paths give the reference path's numbers, bit for bit: the ``-inf`` Pad
folded into NanoDet's MaxPool (onnx_fold) and the per-plane input normalisation."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from strived.perception import onnx_fold  # noqa: E402
from strived.perception.detect_nanodet import (NANODET_MEAN_BGR, NANODET_MODEL_FILE, NANODET_STD_BGR,  # noqa: E402
                                               NanoDetDetector, find_model_file)


def _session(src):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(src, opts, providers=["CPUExecutionProvider"])


def _pad_pool(value: float, pads=(0, 0, 1, 1, 0, 0, 1, 1)):
    """x -> Pad(pads, value) -> MaxPool 3x3 stride 2 -> y."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, "h", "w"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inits = [numpy_helper.from_array(np.array(pads, np.int64), "pads"),
             numpy_helper.from_array(np.array(value, np.float32), "value")]
    nodes = [helper.make_node("Pad", ["x", "pads", "value"], ["p"]),
             helper.make_node("MaxPool", ["p"], ["y"], kernel_shape=[3, 3], strides=[2, 2])]
    graph = helper.make_graph(nodes, "pad_pool", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_minus_inf_pad_folds_into_the_pool_with_the_same_outputs():
    model = _pad_pool(-np.inf)
    ref = _session(model.SerializeToString())
    assert onnx_fold.fold_maxpool_pads(model) == 1
    assert [n.op_type for n in model.graph.node] == ["MaxPool"]
    pool = model.graph.node[0]
    assert list(helper.get_attribute_value(next(a for a in pool.attribute if a.name == "pads"))) == [1, 1, 1, 1]
    fast = _session(model.SerializeToString())
    rng = np.random.default_rng(0)
    for h, w in ((12, 20), (13, 7), (3, 3)):
        x = (rng.standard_normal((1, 2, h, w)) - 3.0).astype(np.float32)   # all negative: a 0 pad would win
        a, b = ref.run(None, {"x": x})[0], fast.run(None, {"x": x})[0]
        assert a.shape == b.shape and np.array_equal(a, b)


@pytest.mark.parametrize("value, pads", [(0.0, (0, 0, 1, 1, 0, 0, 1, 1)),        # a 0 pad is not ignored
                                         (-np.inf, (0, 1, 1, 1, 0, 0, 1, 1)),    # a channel padded
                                         (-np.inf, (0, 0, 3, 3, 0, 0, 3, 3))])   # as wide as the window
def test_pads_a_pool_cannot_take_are_left_alone(value, pads):
    model = _pad_pool(value, pads)
    assert onnx_fold.fold_maxpool_pads(model) == 0
    assert [n.op_type for n in model.graph.node] == ["Pad", "MaxPool"]


def _frames(shared_dir):
    """Real frames when bench-dev is here (ccd_000838 at its crash: near passes too), else a
    generated street-like frame."""
    from strived.perception.video import iter_frames

    path = shared_dir / "data" / "bench-dev" / "videos" / "ccd_000838.mp4" if shared_dir else None
    if path is not None and path.exists():
        return [f.image for f in iter_frames(path, 10.0) if 1.8 <= f.t_s <= 2.95]
    rng = np.random.default_rng(3)
    img = rng.integers(0, 255, (360, 640, 3), dtype=np.uint8)
    img[200:300, 250:420] = (40, 40, 180)
    return [img, img[:, ::-1].copy()]


@pytest.fixture
def frames(request):
    try:
        shared = request.getfixturevalue("shared_dir")
    except pytest.skip.Exception:
        shared = None
    return _frames(shared)


def test_folded_nanodet_detects_exactly_what_the_shipped_graph_does(frames):
    path = find_model_file(NANODET_MODEL_FILE)
    model = onnx.load(str(path))
    assert onnx_fold.fold_maxpool_pads(model) == 1          # the first feature map's pool
    fast = NanoDetDetector(device="cpu")                    # loads the folded graph
    ref = NanoDetDetector(device="cpu")
    ref.session = _session(str(path))                       # the file as shipped
    for det in (fast, ref):
        det.reset()
    got = fast.detect(frames[:4]) + fast.detect(frames[4:])
    want = ref.detect(frames[:4]) + ref.detect(frames[4:])
    assert len(got) == len(frames) and sum(len(d) for d in want) > 0
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    x = np.random.default_rng(1).standard_normal((2, 3, 192, 320)).astype(np.float32)
    for a, b in zip(fast.session.run(None, {fast.input_name: x}), ref.session.run(None, {ref.input_name: x})):
        assert np.array_equal(a, b)


def test_network_input_is_the_reference_normalisation(frames, monkeypatch):
    """The per-plane float32 (v - mean) * (1 / std) equals the whole-image formula it replaced."""
    import cv2

    det = NanoDetDetector(device="cpu", near_width=0)
    seen = []
    real = det._forward
    monkeypatch.setattr(det, "_forward", lambda x: seen.append(x.copy()) or real(x))
    det.detect(frames[:2])
    h0, w0 = frames[0].shape[:2]
    in_w, in_h = det.input_size(w0, h0)
    s = min(in_w / w0, in_h / h0)
    nw, nh = max(1, int(round(w0 * s))), max(1, int(round(h0 * s)))
    want = np.zeros((2, 3, in_h, in_w), np.float32)
    for b, f in enumerate(frames[:2]):
        im = cv2.resize(f, (nw, nh), interpolation=cv2.INTER_LINEAR).astype(np.float32)
        want[b, :, :nh, :nw] = ((im - NANODET_MEAN_BGR) * (1.0 / NANODET_STD_BGR)).transpose(2, 0, 1)
    assert len(seen) == 1 and np.array_equal(seen[0], want)
