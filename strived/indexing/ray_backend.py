"""Per-video perception on a Ray cluster with Ray Data; records are written by the driver.

A dataset of the files to index (path, id, camera config) goes through ``map_batches`` (one video
per batch, ``num_cpus``/``num_gpus`` per task); each task perceives its video and returns plain data
(the ``strived.records/1`` JSON text, the thumbnail bytes, timings) or the error text. The driver
streams the results as they finish and writes them through the same writer as local indexing, so
a library is written by one process only. Ray Data retries a task whose worker or node died
(system failures), so a killed worker costs time, not videos; a video whose result the driver has
already written is never written again.

On a remote cluster the workers must be able to import ``strived`` (installed there, or shipped
with ``runtime_env={"py_modules": [...]}``, which this module does for non-local addresses) and
read the video paths (a shared filesystem mounted at the same path on every node).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import strived

from ..errors import Cancelled, StrivedError
from ..offline import OPT_OUTS
from ..perception.pipeline import PerceptionConfig, PerceptionResult, perceive_video
from ..records import VideoRecords
from . import ray_local
from .workers import limit_threads

POLL_S = 0.25


def _perceive_one(path: str, video_id: str, cfg_dict: dict, camera_config, root: str) -> dict:
    """Perceive one video in a Ray worker; a JSON-able result, never raises."""
    fields = {k: v for k, v in cfg_dict.items() if k in PerceptionConfig.__dataclass_fields__}
    try:
        res = perceive_video(path, video_id=video_id, config=PerceptionConfig(**fields),
                             camera_config=camera_config, root=root)
    except StrivedError as e:
        return {"error": str(e), "kind": type(e).__name__}
    except Exception as e:  # reported per file by the driver
        return {"error": f"internal error: {type(e).__name__}: {e}", "kind": type(e).__name__}
    return {"records": res.records.to_json_dict(), "thumbnail_size": res.thumbnail_size,
            "timings_s": res.timings_s, "n_sampled": res.n_sampled, "duration_s": res.duration_s,
            "thumbnail": res.thumbnail_jpeg}


def _perceive_batch(batch: dict, cfg_json: str, root: str, cpus: float = 1.0) -> dict:
    """``map_batches`` function: columns ``path``, ``video_id``, ``camera`` (JSON text) in;
    ``video_id``, ``result`` (JSON text) and ``thumbnail`` (bytes) out, one row per video. The
    task uses as many threads as the CPUs it asked the cluster for."""
    import json

    limiter = limit_threads(max(1, int(cpus)))  # noqa: F841  (kept alive for this batch)

    cfg = json.loads(cfg_json)
    out = {"video_id": [], "result": [], "thumbnail": []}
    for path, vid, cam in zip(batch["path"], batch["video_id"], batch["camera"]):
        r = _perceive_one(str(path), str(vid), cfg, json.loads(cam) if cam else None, root)
        out["video_id"].append(str(vid))
        out["thumbnail"].append(r.pop("thumbnail", None) or b"")
        out["result"].append(json.dumps(r))
    return out


#: How long to wait for a Ray head node to accept a connection before saying it is not there.
CONNECT_TIMEOUT_S = 5.0


def check_ray_address(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Refuse a malformed ``--ray`` address, or one where nothing answers within ``timeout_s``,
    with a message (ray.init would wait forever, or fail with a traceback). 'local', 'auto' and
    'ray://' client addresses are left to Ray."""
    import socket

    if address in ("local", "", "auto") or address.startswith("ray://"):
        return
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise StrivedError(f"--ray {address!r}: expected HOST:PORT of a Ray head node (e.g. "
                           "10.0.0.5:6379), or 'local'")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as e:
        raise StrivedError(f"--ray {address}: no Ray head node answers there ({e.strerror or e}); "
                           "start one with `ray start --head`, or use --ray local") from None


def check_feasible(resources: dict, cpus_per_task: float, gpus_per_task: float) -> None:
    """Refuse work whose tasks ask for more CPUs or GPUs than the whole cluster has (Ray would
    queue them forever)."""
    have_cpu, have_gpu = float(resources.get("CPU", 0.0)), float(resources.get("GPU", 0.0))
    if cpus_per_task > have_cpu:
        raise StrivedError(f"--ray-cpus {cpus_per_task:g}: the Ray cluster has {have_cpu:g} CPUs in all; "
                           "no task could ever start")
    if gpus_per_task > have_gpu:
        raise StrivedError(f"--ray-gpus {gpus_per_task:g}: the Ray cluster has {have_gpu:g} GPUs in all; "
                           "no task could ever start")


def init_ray(address: str, num_cpus: int | None = None):
    """Connect to ``address`` ('local' starts a private instance that stays on this machine:
    `ray_local`); reuse an existing connection."""
    if address in ("local", ""):
        ray_local.prepare_import()
    try:
        import ray
    except ImportError as e:
        raise StrivedError("--ray needs Ray: pip install 'ray[data]'") from e
    if ray.is_initialized():
        return ray
    check_ray_address(address)

    # workers get the same opt-outs (a local instance inherits this process's environment; a
    # cluster's workers do not)
    env = {k: os.environ.get(k, v) for k, v in OPT_OUTS.items()}
    if address in ("local", ""):
        ray_local.start_local(ray, num_cpus)
    else:
        ray.init(address=address, log_to_driver=False, configure_logging=False,
                 runtime_env={"py_modules": [os.path.dirname(strived.__file__)], "env_vars": env})
    return ray


def _dataset(items, cfg, root: Path, cpus_per_task: float, gpus_per_task: float):
    """The Ray Data pipeline: one row per video, perceived by ``_perceive_batch`` one at a time."""
    import json

    import ray.data

    rows = [{"path": str(Path(it.path).resolve()), "video_id": it.video_id,
             "camera": json.dumps(it.camera_config) if it.camera_config else ""} for it in items]
    remote_args = {"num_cpus": cpus_per_task}
    if gpus_per_task:
        remote_args["num_gpus"] = gpus_per_task
    return ray.data.from_items(rows, override_num_blocks=len(rows)).map_batches(
        _perceive_batch, batch_size=1, batch_format="numpy",
        fn_kwargs={"cfg_json": json.dumps(cfg.to_dict()), "root": str(root), "cpus": cpus_per_task},
        **remote_args)


def _result_of(row: dict):
    """A pipeline row's PerceptionResult, or the StrivedError it carries."""
    import json

    out = json.loads(row["result"])
    if "error" in out:
        return StrivedError(out["error"])
    try:
        rec = VideoRecords.from_json_dict(out["records"])
    except StrivedError as e:
        return e
    size = tuple(out["thumbnail_size"]) if out.get("thumbnail_size") else None
    thumb = bytes(row["thumbnail"]) if row.get("thumbnail") is not None and len(row["thumbnail"]) else None
    return PerceptionResult(rec, thumb, size, out.get("timings_s", {}),
                            out.get("n_sampled", 0), out.get("duration_s", 0.0))


def perceive_with_ray(items, cfg, address: str, root: Path, *, cancel=None,
                      cpus_per_task: float = 1.0, gpus_per_task: float = 0.0
                      ) -> Iterator[tuple[object, object]]:
    """Perceive ``items`` as a Ray Data pipeline; yield (item, PerceptionResult | Exception) as
    videos finish (in no particular order).

    ``cancel()`` is polled every ``POLL_S``; when true, the pipeline is abandoned (no new videos
    start) and ``Cancelled`` is raised."""
    import queue
    import threading

    if not items:
        return
    ray = init_ray(address)
    check_feasible(ray.cluster_resources(), cpus_per_task, gpus_per_task)
    ds = _dataset(items, cfg, root, cpus_per_task, gpus_per_task)
    by_id = {it.video_id: it for it in items}

    results: queue.Queue = queue.Queue(maxsize=4)
    stop = threading.Event()
    done = object()

    def pump():
        try:
            for row in ds.iter_rows():
                while not stop.is_set():
                    try:
                        results.put(row, timeout=POLL_S)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
        except Exception as e:  # the pipeline itself failed (cluster lost, ...)
            results.put(e)
        results.put(done)

    th = threading.Thread(target=pump, name="strived-ray-data", daemon=True)
    th.start()
    seen: set[str] = set()
    try:
        while True:
            if cancel is not None and cancel():
                raise Cancelled()
            try:
                row = results.get(timeout=POLL_S)
            except queue.Empty:
                continue
            if row is done:
                break
            if isinstance(row, Exception):
                for vid, item in by_id.items():
                    if vid not in seen:
                        yield item, StrivedError(f"the Ray pipeline failed: {row}")
                return
            vid = str(row["video_id"])
            item = by_id.get(vid)
            if item is None or vid in seen:   # a retried task's duplicate: written once only
                continue
            seen.add(vid)
            yield item, _result_of(row)
        for vid, item in by_id.items():
            if vid not in seen:
                yield item, StrivedError("the Ray pipeline returned no result for this video")
    finally:
        stop.set()
