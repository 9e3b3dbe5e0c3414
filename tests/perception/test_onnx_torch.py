"""The PyTorch runtime of the shipped ONNX detector (the CUDA path when onnxruntime is CPU-only):
same outputs as onnxruntime, same detections, unsupported graphs refused, runtime selection."""

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

from strived.perception import detect as D  # noqa: E402
from strived.perception.onnx_torch import OnnxTorchError, TorchOnnxGraph  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[2] / "resources" / "sample" / "street_bus_passes.mp4"


def _sample_frames(n=3):
    from strived.perception.video import iter_frames

    frames = []
    for fr in iter_frames(SAMPLE, 2.0):
        frames.append(fr.image)
        if len(frames) == n:
            break
    assert len(frames) == n
    return frames


def test_graph_outputs_equal_onnxruntime():
    path = D.find_model_file(D.NANODET_MODEL_FILE)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    graph = TorchOnnxGraph(path, "cpu")
    assert graph.output_names == [o.name for o in sess.get_outputs()]
    x = np.random.default_rng(1).normal(size=(2, 3, 320, 448)).astype(np.float32)
    want = sess.run(graph.output_names, {sess.get_inputs()[0].name: x})
    got = graph(x)
    for w, g in zip(want, got):
        assert w.shape == g.shape
        np.testing.assert_allclose(g, w, atol=1e-4, rtol=1e-4)


def _ort_and_torch(monkeypatch, device):
    """The shipped detector on onnxruntime (CPU) and on the PyTorch runtime on ``device``."""
    monkeypatch.setenv("STRIVED_DETECTOR_RUNTIME", "onnxruntime")
    ref = D.NanoDetDetector(device="cpu")
    monkeypatch.setenv("STRIVED_DETECTOR_RUNTIME", "torch")
    return ref, D.NanoDetDetector(device=device)


def test_torch_runtime_detects_what_onnxruntime_detects(monkeypatch):
    frames = _sample_frames()
    ref, tch = _ort_and_torch(monkeypatch, "cpu")
    assert ref.runtime == "onnxruntime" and tch.runtime == "torch" and tch.config["runtime"] == "torch"
    a, b = ref.detect(frames), tch.detect(frames)
    assert sum(len(d) for d in a) >= 3          # the sample shows a bus, cars and people
    for da, db in zip(a, b):
        assert da.shape == db.shape
        np.testing.assert_allclose(db[:, :4], da[:, :4], atol=0.05)
        np.testing.assert_allclose(db[:, 4], da[:, 4], atol=1e-4)
        assert (db[:, 5] == da[:, 5]).all()


def _tiny_model(tmp_path, op="Softmax"):
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    node = helper.make_node(op, ["x"], ["y"])
    model = helper.make_model(helper.make_graph([node], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / f"{op}.onnx"
    onnx.save(model, str(path))
    return path


def test_unsupported_operator_refused_by_name(tmp_path):
    with pytest.raises(OnnxTorchError, match="Softmax"):
        TorchOnnxGraph(_tiny_model(tmp_path, "Softmax"), "cpu")
    g = TorchOnnxGraph(_tiny_model(tmp_path, "Sigmoid"), "cpu")
    out = g(np.array([[0.0, 1.0, -1.0, 2.0]], np.float32))[0]
    np.testing.assert_allclose(out, 1 / (1 + np.exp(-np.array([[0.0, 1.0, -1.0, 2.0]]))), rtol=1e-6)


def test_not_an_onnx_file(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00garbage" * 10)
    with pytest.raises(OnnxTorchError, match="cannot read"):
        TorchOnnxGraph(bad, "cpu")


class _OrtNoCuda:
    @staticmethod
    def get_available_providers():
        return ["CPUExecutionProvider"]


class _OrtCuda:
    @staticmethod
    def get_available_providers():
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]


def test_runtime_choice(monkeypatch):
    import strived.perception.onnx_torch as OT

    monkeypatch.delenv("STRIVED_DETECTOR_RUNTIME", raising=False)
    monkeypatch.setattr(OT, "torch_cuda_available", lambda: True)
    assert D.nanodet_runtime("cuda", _OrtNoCuda) == "torch"       # pip onnxruntime is CPU-only
    assert D.nanodet_runtime("cuda", _OrtCuda) == "onnxruntime"
    assert D.nanodet_runtime("cpu", _OrtNoCuda) == "onnxruntime"
    assert D.nanodet_runtime("cpu", None) == "opencv-dnn"
    monkeypatch.setattr(OT, "torch_cuda_available", lambda: False)
    assert D.nanodet_runtime("cuda", _OrtNoCuda) == "onnxruntime"   # no GPU anywhere: the CPU
    monkeypatch.setenv("STRIVED_DETECTOR_RUNTIME", "tensorrt")
    with pytest.raises(D.DetectorError, match="STRIVED_DETECTOR_RUNTIME"):
        D.nanodet_runtime("cpu", _OrtNoCuda)


def test_auto_device_uses_torch_cuda_when_present(monkeypatch):
    import strived.perception.onnx_torch as OT

    monkeypatch.setattr(OT, "torch_cuda_available", lambda: True)
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        assert D.resolve_device("auto", "nanodet-g") == "cuda"
    monkeypatch.setattr(OT, "torch_cuda_available", lambda: False)
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        assert D.resolve_device("auto", "nanodet-g") == "cpu"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_detections_match_cpu(monkeypatch):
    frames = _sample_frames()
    ref, gpu = _ort_and_torch(monkeypatch, "cuda")
    assert gpu.device == "cuda"
    for da, db in zip(ref.detect(frames), gpu.detect(frames)):
        assert da.shape == db.shape
        np.testing.assert_allclose(db[:, :4], da[:, :4], atol=0.5)
        assert (db[:, 5] == da[:, 5]).all()
