"""Exact simplifications of an ONNX graph before onnxruntime runs it.

The shipped NanoDet graph (converted from TF.js) pads its first feature map with ``-inf`` in a
``Pad`` node before a ``MaxPool``. onnxruntime cannot fuse that pair: it converts the map out of
its blocked (NCHWc) layout for the ``Pad`` and back for the ``MaxPool``, which took a fifth of the
network's CPU time at 640 px. A ``MaxPool`` with the same ``pads`` ignores the padded cells, which
is what a ``-inf`` pad does: the maximum of every window is the same number, so the outputs are
bit-identical (tests/perception/test_onnx_fold.py).

Needs the ``onnx`` package (protobuf reader); loads lazily.
"""

from __future__ import annotations

import math
import os


def _attr(node, name: str, default=None):
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _const(graph, name: str):
    """The value of initializer ``name`` as a numpy array, None when it is not one."""
    from onnx import numpy_helper

    for t in graph.initializer:
        if t.name == name:
            return numpy_helper.to_array(t)
    return None


def _pool_pads(pad_node, pool_node, graph) -> list[int] | None:
    """The spatial pads [b1, b2, e1, e2] the ``MaxPool`` can take over from ``pad_node``, or None
    when the pair does not qualify (not a constant ``-inf`` pad of the spatial axes only, a pool
    with pads, ceil mode, auto_pad, or a pad as wide as the window)."""
    mode = _attr(pad_node, "mode", b"constant")
    if (mode.decode() if isinstance(mode, bytes) else mode) != "constant" or len(pad_node.input) < 3:
        return None
    pads, value = _const(graph, pad_node.input[1]), _const(graph, pad_node.input[2])
    if len(pad_node.input) > 3 and pad_node.input[3]:          # an axes input: not handled
        return None
    if pads is None or value is None or value.size != 1:
        return None
    v = float(value.ravel()[0])
    if not (math.isinf(v) and v < 0):
        return None
    pads = [int(p) for p in pads.ravel()]
    k = len(pads) // 2
    if k != 4 or any(pads[i] != 0 or pads[i + k] != 0 for i in (0, 1)) or min(pads) < 0:
        return None                                            # batch or channel padded
    auto = _attr(pool_node, "auto_pad", b"NOTSET")
    if (auto.decode() if isinstance(auto, bytes) else auto) != "NOTSET" or _attr(pool_node, "ceil_mode", 0):
        return None
    if any(_attr(pool_node, "pads", [0, 0, 0, 0])) or len(pool_node.output) != 1:
        return None
    spatial = [pads[2], pads[3], pads[6], pads[7]]
    kernel = list(_attr(pool_node, "kernel_shape", []))
    if len(kernel) != 2 or any(spatial[i] >= kernel[i % 2] for i in range(4)):
        return None
    return spatial


def fold_maxpool_pads(model) -> int:
    """Move every ``-inf`` ``Pad`` that feeds only a ``MaxPool`` into that pool's ``pads``, in
    place; returns how many were folded."""
    from onnx import helper

    g = model.graph
    consumers: dict[str, list] = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    outputs = {o.name for o in g.output}
    folded = []
    for n in g.node:
        if n.op_type != "Pad" or n.domain not in ("", "ai.onnx") or n.output[0] in outputs:
            continue
        users = consumers.get(n.output[0], [])
        if len(users) != 1 or users[0].op_type != "MaxPool" or list(users[0].input) != [n.output[0]]:
            continue
        pool = users[0]
        spatial = _pool_pads(n, pool, g)
        if spatial is None:
            continue
        pool.input[0] = n.input[0]
        kept = [a for a in pool.attribute if a.name != "pads"]
        del pool.attribute[:]
        pool.attribute.extend(kept + [helper.make_attribute("pads", spatial)])
        folded.append(n)
    for n in folded:
        g.node.remove(n)
    return len(folded)


def model_bytes(path: str | os.PathLike) -> bytes | None:
    """The model at ``path`` with its ``-inf`` pads folded into the pools, serialized; None when
    there is nothing to fold or the ``onnx`` package is missing (then load ``path`` itself)."""
    try:
        import onnx
    except ImportError:
        return None
    model = onnx.load(str(path))
    if not fold_maxpool_pads(model):
        return None
    return model.SerializeToString()
