"""Perception: decode + sample a video, detect, track, range, estimate ego motion, attributes.

Everything here runs offline on a CPU (OpenCV DNN YOLOv3-tiny, a ByteTrack tracker on scipy,
camera geometry and classical CV), with pluggable detector backends for models on disk.
Heavy libraries (cv2, torch, onnxruntime, transformers) are imported inside functions.
"""
