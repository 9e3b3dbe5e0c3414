"""Per-video perception as Ray tasks on a Ray cluster; results are written by the driver.

Each task perceives one video and returns plain data (the ``strived.records/1`` JSON dict, the
thumbnail bytes, timings) or the error text, so the driver and the workers need not share Python
objects beyond the package itself. On a remote cluster the workers must be able to import
``strived`` (installed there, or shipped with ``runtime_env={"py_modules": [...]}``, which this module
does for non-local addresses) and see the video paths (a shared filesystem).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

from ..errors import Cancelled, StrivedError

POLL_S = 0.25


def _perceive_remote(path: str, video_id: str, cfg_dict: dict, camera_config, root: str) -> dict:
    """Run in a Ray worker: perceive one video, return a JSON-able result (never raises)."""
    from ..perception.pipeline import PerceptionConfig, perceive_video

    fields = {k: v for k, v in cfg_dict.items() if k in PerceptionConfig.__dataclass_fields__}
    try:
        res = perceive_video(path, video_id=video_id, config=PerceptionConfig(**fields),
                             camera_config=camera_config, root=root)
    except StrivedError as e:
        return {"error": str(e), "kind": type(e).__name__}
    except Exception as e:  # reported per file by the driver
        return {"error": f"internal error: {type(e).__name__}: {e}", "kind": type(e).__name__}
    return {"records": res.records.to_json_dict(), "thumbnail": res.thumbnail_jpeg,
            "thumbnail_size": res.thumbnail_size, "timings_s": res.timings_s,
            "n_sampled": res.n_sampled, "duration_s": res.duration_s}


def init_ray(address: str, num_cpus: int | None = None):
    """Connect to ``address`` ('local' starts a private instance); reuse an existing connection."""
    try:
        import ray
    except ImportError as e:
        raise StrivedError("--ray needs Ray: pip install 'ray[data]'") from e
    if ray.is_initialized():
        return ray
    if address in ("local", ""):
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    else:
        import strived

        ray.init(address=address, log_to_driver=False, configure_logging=False,
                 runtime_env={"py_modules": [os.path.dirname(strived.__file__)]})
    return ray


def perceive_with_ray(items, cfg, address: str, root: Path, *, cancel=None,
                      cpus_per_task: float = 1.0) -> Iterator[tuple[object, object]]:
    """Submit one Ray task per item; yield (item, PerceptionResult | Exception) as tasks finish.

    ``cancel()`` is polled every ``POLL_S``; when true, pending tasks are cancelled and
    ``Cancelled`` is raised.
    """
    from ..perception.pipeline import PerceptionResult
    from ..records import VideoRecords

    if not items:
        return
    ray = init_ray(address)
    task = ray.remote(num_cpus=cpus_per_task, max_retries=1)(_perceive_remote)
    cfg_dict = cfg.to_dict()
    refs = {}
    for item in items:
        ref = task.remote(str(item.path.resolve()), item.video_id, cfg_dict, item.camera_config, str(root))
        refs[ref] = item
    pending = list(refs)
    try:
        while pending:
            if cancel is not None and cancel():
                raise Cancelled()
            ready, pending = ray.wait(pending, num_returns=1, timeout=POLL_S)
            for ref in ready:
                item = refs[ref]
                try:
                    out = ray.get(ref)
                except Exception as e:  # worker died, task cancelled...
                    yield item, StrivedError(f"Ray task failed: {e}")
                    continue
                if "error" in out:
                    yield item, StrivedError(out["error"])
                    continue
                try:
                    rec = VideoRecords.from_json_dict(out["records"])
                except StrivedError as e:
                    yield item, e
                    continue
                size = tuple(out["thumbnail_size"]) if out.get("thumbnail_size") else None
                yield item, PerceptionResult(rec, out.get("thumbnail"), size, out.get("timings_s", {}),
                                             out.get("n_sampled", 0), out.get("duration_s", 0.0))
    finally:
        for ref in pending:
            try:
                ray.cancel(ref, force=True)
            except Exception:
                pass
