#!/usr/bin/env bash
# The GPU throughput check of `strived index`, as run through the device tool (a bare machine with
# PyTorch+CUDA, OpenCV and onnxruntime; the project's other pure-Python dependencies travel as
# wheels in .whl/, the videos in .benchvid/). Writes $OUT/bench_index_gpu.json and a log.
#   usage (on that machine, in the repository root): bash benchmarks/device_index.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi -L; nproc; python3 -c "import torch, cv2, onnxruntime; print(torch.__version__, torch.cuda.is_available(), cv2.__version__, onnxruntime.__version__)"
timeout 120 python3 -m pytest -q -p no:cacheprovider --noconftest tests/perception/test_onnx_torch.py 2>&1 | tail -4
timeout 480 python3 -m strived bench index .benchvid --device cuda --workers 16 8 ${EXTRA_WORKERS:-} \
    --json "$OUT/bench_index_gpu.json" 2>&1 | tee "$OUT/bench_index_gpu.log"
