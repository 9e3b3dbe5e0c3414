"""A child process for the kill tests: `python -m tests.faults._worker MODE ...`.

    cli ARGS...              run `strived ARGS` with a slow fake detector and the hash embedder
                             ($STRIVED_TEST_PERCEIVE_LOG: a line per perception call, with its time range)
    commit-kill LIB N        add N synthetic videos, then die (os._exit) at the dense index commit
"""

from __future__ import annotations

import os
import sys
import time


class SlowDetector:
    """The perception tests' colour detector, slowed so that a kill lands mid-run."""

    def __init__(self, delay_s: float, hold_after: int = 0):
        from tests.perception.conftest import FakeDetector

        self._d = FakeDetector()
        self.name, self.device, self.config = "fake", "cpu", {"detector": "fake"}
        self.delay_s = delay_s
        self.hold_after, self.calls = hold_after, 0

    def detect(self, frames):
        self.calls += 1
        if self.hold_after and self.calls > self.hold_after:
            while True:          # hold here (mid-run, deterministically) until a signal stops the process
                time.sleep(0.05)
        time.sleep(self.delay_s)
        return self._d.detect(frames)


def _patch_embedder():
    from strived.retrieval import sources
    from tests.faults.conftest import HashEmbedder

    emb = HashEmbedder()
    sources.get_default_embedder = lambda: emb


def _log_perception(log_path: str) -> None:
    """Append one line per perception call to ``log_path``: the time range it perceives ("all"
    for a whole video), when it starts and when it returns."""
    import strived.perception.pipeline as pipeline

    real = pipeline.perceive_video

    def logged(path, **kw):
        what = "all" if kw.get("time_range") is None else "%g-%g" % kw["time_range"]
        with open(log_path, "a") as fh:
            fh.write(f"start {what}\n")
        res = real(path, **kw)
        with open(log_path, "a") as fh:
            fh.write(f"done {what}\n")
        return res
    pipeline.perceive_video = logged


def main(argv: list[str]) -> int:
    import signal

    # a process started in the background by a non-interactive shell inherits SIGINT ignored, and
    # Python then installs no KeyboardInterrupt handler: put back what a terminal's Ctrl-C meets
    signal.signal(signal.SIGINT, signal.default_int_handler)
    mode = argv[0]
    _patch_embedder()
    if mode == "cli":
        import strived.perception.detect as det

        delay = float(os.environ.get("STRIVED_TEST_DETECT_DELAY", "0.05"))
        hold = int(os.environ.get("STRIVED_TEST_DETECT_HOLD_AFTER", "0"))
        det.make_detector = lambda *a, **k: SlowDetector(delay, hold)
        if os.environ.get("STRIVED_TEST_PERCEIVE_LOG"):
            _log_perception(os.environ["STRIVED_TEST_PERCEIVE_LOG"])
        from strived.cli import main as cli_main

        args = argv[1:]
        if args[:1] == ["index"] and "--workers" not in args:
            args += ["--workers", "1"]     # the slow fake detector lives in this process
        return cli_main(args)
    if mode == "commit-kill":
        import strived.retrieval.dense as dense
        from strived.retrieval.sources import ensure_text_index
        from strived.store import Library
        from tests.faults.conftest import synth_records

        real = dense.os.replace

        def replace(src, dst):
            if str(dst).endswith(dense.MANIFEST):
                os._exit(137)  # as a kill -9 right before the commit
            return real(src, dst)
        dense.os.replace = replace
        with Library.open(argv[1]) as lib:
            lib.add_videos(synth_records(int(argv[2]), seed0=300))
            ensure_text_index(lib)
        return 0
    raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
