"""Run a small ONNX convolutional graph with PyTorch, so the shipped detector can use a CUDA GPU.

The pip ``onnxruntime`` wheel is CPU-only and OpenCV's pip build has no CUDA; PyTorch's CUDA build
is what most GPU workstations already have. This executes the ONNX graph node by node with
``torch.nn.functional`` on any torch device. Only the operators the shipped models use are
supported (Conv, Pad, LeakyRelu, Relu, Concat, Reshape, Transpose, Resize, Add, Mul, Split,
Sigmoid, MaxPool); a graph with any other operator is refused at load time with its name, never
run approximately. Outputs equal onnxruntime's to float32 rounding (tests/perception/test_onnx_torch.py).

Needs the ``onnx`` package (protobuf reader) and ``torch``; both load lazily.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import StrivedError

SUPPORTED_OPS = frozenset({"Conv", "Pad", "LeakyRelu", "Relu", "Concat", "Reshape", "Transpose", "Resize",
                           "Add", "Mul", "Split", "Sigmoid", "MaxPool"})


class OnnxTorchError(StrivedError):
    """The graph cannot be run by this executor (missing package, unsupported operator)."""


def torch_cuda_available() -> bool:
    """True when torch with a usable CUDA device and the onnx reader are both installed."""
    try:
        import onnx  # noqa: F401
        import torch
    except ImportError:
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception:  # a broken driver install answers with odd errors
        return False


def _attrs(node) -> dict[str, Any]:
    from onnx import helper

    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        out[a.name] = v.decode() if isinstance(v, bytes) else v
    return out


def _torch_pads(onnx_pads: list[int]) -> list[int]:
    """ONNX pads [b1, b2, ..., e1, e2, ...] (first axis first) -> torch F.pad (last axis first)."""
    k = len(onnx_pads) // 2
    out: list[int] = []
    for ax in reversed(range(k)):
        out += [int(onnx_pads[ax]), int(onnx_pads[ax + k])]
    return out


class TorchOnnxGraph:
    """An ONNX graph's nodes bound to torch operations on one device. Call with numpy inputs by
    name (or positionally for a single input); returns numpy outputs in the graph's output order."""

    def __init__(self, path: str | os.PathLike, device: str = "cuda"):
        try:
            import onnx
            import torch
            from onnx import numpy_helper
        except ImportError as e:
            raise OnnxTorchError("running the detector with PyTorch needs the 'onnx' and 'torch' packages "
                                 f"({e.name} is missing)") from e
        path = Path(path)
        try:
            model = onnx.load(str(path))
        except Exception as e:  # protobuf decode errors
            raise OnnxTorchError(f"cannot read ONNX model {path}: {e}") from e
        g = model.graph
        unsupported = sorted({n.op_type for n in g.node} - SUPPORTED_OPS)
        if unsupported:
            raise OnnxTorchError(f"{path.name}: operators not supported by the PyTorch runtime: "
                                 + ", ".join(unsupported))
        self.torch = torch
        self.device = torch.device(device)
        self.consts: dict[str, Any] = {}
        self.host: dict[str, np.ndarray] = {}   # small integer/float constants read as Python values
        for init in g.initializer:
            arr = numpy_helper.to_array(init)
            self.host[init.name] = arr
            if arr.dtype.kind == "f":
                self.consts[init.name] = torch.from_numpy(np.array(arr, dtype=arr.dtype, copy=True)).to(self.device)
        init_names = {i.name for i in g.initializer}
        self.input_names = [i.name for i in g.input if i.name not in init_names]
        self.output_names = [o.name for o in g.output]
        self.nodes = [(n.op_type, list(n.input), list(n.output), _attrs(n)) for n in g.node]
        last_use: dict[str, int] = {}
        for k, (_, ins, _, _) in enumerate(self.nodes):
            for name in ins:
                last_use[name] = k
        self._free_after = [[n for n in ins if last_use.get(n) == k and n not in self.output_names
                             and n not in self.consts] for k, (_, ins, _, _) in enumerate(self.nodes)]

    def _ints(self, name: str) -> list[int]:
        return [int(v) for v in np.asarray(self.host[name]).reshape(-1)]

    def __call__(self, feeds: dict[str, np.ndarray] | np.ndarray) -> list[np.ndarray]:
        torch = self.torch
        if not isinstance(feeds, dict):
            feeds = {self.input_names[0]: feeds}
        env: dict[str, Any] = dict(self.consts)
        for name in self.input_names:
            env[name] = torch.from_numpy(np.ascontiguousarray(feeds[name], dtype=np.float32)).to(self.device)
        with torch.inference_mode():
            for k, (op, ins, outs, at) in enumerate(self.nodes):
                res = self._run(op, ins, at, env)
                if isinstance(res, (list, tuple)):
                    for name, v in zip(outs, res):
                        env[name] = v
                else:
                    env[outs[0]] = res
                for name in self._free_after[k]:
                    env.pop(name, None)
            return [env[n].float().cpu().numpy() for n in self.output_names]

    def _run(self, op: str, ins: list[str], at: dict, env: dict):
        import torch.nn.functional as F

        x = env[ins[0]] if ins and ins[0] else None
        if op == "Conv":
            w = env[ins[1]]
            b = env[ins[2]] if len(ins) > 2 and ins[2] else None
            if at.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
                raise OnnxTorchError(f"Conv auto_pad={at['auto_pad']} is not supported")
            pads = at.get("pads", [0] * (2 * (w.dim() - 2)))
            k = len(pads) // 2
            if list(pads[:k]) != list(pads[k:]):
                x = F.pad(x, _torch_pads(pads))
                pads = [0] * (2 * k)
            return F.conv2d(x, w, b, stride=tuple(at.get("strides", [1, 1])), padding=tuple(pads[:k]),
                            dilation=tuple(at.get("dilations", [1, 1])), groups=int(at.get("group", 1)))
        if op == "Pad":
            mode = at.get("mode", "constant")
            pads = self._ints(ins[1]) if len(ins) > 1 else list(at.get("pads", []))
            value = float(np.asarray(self.host[ins[2]]).reshape(-1)[0]) if len(ins) > 2 and ins[2] else 0.0
            if mode == "constant":
                return F.pad(x, _torch_pads(pads), mode="constant", value=value)
            return F.pad(x, _torch_pads(pads), mode={"reflect": "reflect", "edge": "replicate"}[mode])
        if op == "LeakyRelu":
            return F.leaky_relu(x, float(at.get("alpha", 0.01)))
        if op == "Relu":
            return F.relu(x)
        if op == "Sigmoid":
            return x.sigmoid()
        if op == "Add":
            return x + env[ins[1]]
        if op == "Mul":
            return x * env[ins[1]]
        if op == "Concat":
            return self.torch.cat([env[n] for n in ins], dim=int(at["axis"]))
        if op == "Transpose":
            return x.permute(*at["perm"]) if "perm" in at else x.permute(*reversed(range(x.dim())))
        if op == "Reshape":
            shape = self._ints(ins[1])
            if not at.get("allowzero", 0):
                shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
            return x.reshape(shape)
        if op == "Split":
            axis = int(at.get("axis", 0))
            sizes = self._ints(ins[1]) if len(ins) > 1 and ins[1] else list(at.get("split", []))
            if not sizes:
                raise OnnxTorchError("Split without sizes is not supported")
            return list(self.torch.split(x, sizes, dim=axis))
        if op == "MaxPool":
            pads = at.get("pads", [0, 0, 0, 0])
            k = len(pads) // 2
            if list(pads[:k]) != list(pads[k:]):
                x = F.pad(x, _torch_pads(pads), value=float("-inf"))
                pads = [0] * (2 * k)
            return F.max_pool2d(x, tuple(at["kernel_shape"]), stride=tuple(at.get("strides", [1, 1])),
                                padding=tuple(pads[:k]), ceil_mode=bool(at.get("ceil_mode", 0)))
        if op == "Resize":
            mode = at.get("mode", "nearest")
            ctm = at.get("coordinate_transformation_mode", "half_pixel")
            scales = self._floats(ins[2]) if len(ins) > 2 and ins[2] else []
            sizes = self._ints(ins[3]) if len(ins) > 3 and ins[3] else []
            if sizes:
                size = tuple(sizes[2:])
            elif len(scales) == 4 and scales[:2] == [1.0, 1.0]:
                size = tuple(int(np.floor(d * s)) for d, s in zip(x.shape[2:], scales[2:]))
            else:
                raise OnnxTorchError(f"Resize with scales {scales} is not supported")
            if mode == "linear" and ctm in ("half_pixel", "pytorch_half_pixel"):
                return F.interpolate(x, size=size, mode="bilinear", align_corners=False)
            if mode == "linear" and ctm == "align_corners":
                return F.interpolate(x, size=size, mode="bilinear", align_corners=True)
            if mode == "nearest" and ctm == "asymmetric" and at.get("nearest_mode", "round_prefer_floor") == "floor":
                return F.interpolate(x, size=size, mode="nearest")
            raise OnnxTorchError(f"Resize mode={mode} coordinate_transformation_mode={ctm} is not supported")
        raise OnnxTorchError(f"operator {op} is not supported")

    def _floats(self, name: str) -> list[float]:
        return [float(v) for v in np.asarray(self.host[name]).reshape(-1)]
