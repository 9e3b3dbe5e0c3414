"""The Ray backend indexes tiny videos through a local Ray instance started by the test."""

import pytest

pytestmark = pytest.mark.slow


def test_index_with_local_ray(tmp_path, make_video):
    ray = pytest.importorskip("ray")
    from strived.indexing.job import index_folder
    from strived.perception.detect import DEFAULT_DETECTOR
    from strived.store.library import Library

    src = tmp_path / "v"
    src.mkdir()
    make_video(src / "a.mp4", n_frames=12)
    (src / "bad.mkv").write_bytes(b"x" * 1000)
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        with Library.open(tmp_path / "lib", create=True) as lib:
            rep = index_folder(src, lib, ray_address="local")
            assert rep.indexed == ["a"] and len(rep.failed) == 1 and "cannot decode" in rep.failed[0][1]
            rec = lib.get_video("a")
            assert len(rec.t) == 12 and rec.info.attrs["perception"]["detector"] == DEFAULT_DETECTOR
            assert lib.conn.execute("SELECT COUNT(*) FROM thumbnails").fetchone()[0] == 1
            rep2 = index_folder(src, lib, ray_address="local")
            assert rep2.indexed == [] and rep2.unchanged == 1
    finally:
        ray.shutdown()
