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


def test_two_node_cluster_survives_a_killed_worker_node(tmp_path, make_video):
    """Ray Data on a two-node cluster (loopback): a worker node is killed after the first video is
    written; its tasks are retried on the other node, every video is indexed exactly once and the
    library is consistent."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    from strived.indexing.job import index_folder
    from strived.store.library import Library

    src = tmp_path / "v"
    src.mkdir()
    names = [f"clip{k}" for k in range(6)]
    for k, n in enumerate(names):
        make_video(src / f"{n}.mp4", n_frames=40 + k)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    cluster.add_node(num_cpus=1)        # the node that survives
    victim = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    killed = []

    def progress(ev):
        if ev.stage == "videos" and ev.done >= 1 and not killed:
            cluster.remove_node(victim, allow_graceful=False)   # kill -9 of the node's raylet and workers
            killed.append(ev.done)

    try:
        with Library.open(tmp_path / "lib", create=True) as lib:
            rep = index_folder(src, lib, ray_address=cluster.address, progress=progress)
            assert killed and killed[0] < len(names), "the node must die while videos are still pending"
            assert sorted(rep.indexed) == names and rep.failed == []
            assert sorted(lib.video_ids()) == names
            rows = lib.conn.execute("SELECT video_id, COUNT(*) FROM files GROUP BY video_id").fetchall()
            assert all(c == 1 for _, c in rows) and len(rows) == len(names)
            assert lib.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            assert {len(lib.get_video(n).t) for n in names} == {40 + k for k in range(6)}
    finally:
        ray.shutdown()
        cluster.shutdown()
