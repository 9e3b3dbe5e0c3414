"""ByteTrack on synthetic boxes: ids survive crossings and missed frames."""

import numpy as np
import pytest

from strived.perception.track import ByteTracker, iou_matrix, linear_assignment


def _det(x, y, w=60, h=40, score=0.9, cls=0):
    return [x, y, x + w, y + h, score, cls]


def _run(frames, **kw):
    tr = ByteTracker(**kw)
    ids = []
    for dets in frames:
        pairs = tr.update(np.array(dets, dtype=np.float32).reshape(-1, 6))
        ids.append(dict((di, tid) for tid, di in pairs))
    return tr, ids


def test_iou_and_assignment():
    a = np.array([[0, 0, 10, 10]], float)
    b = np.array([[0, 0, 10, 10], [5, 0, 15, 10], [20, 20, 30, 30]], float)
    assert np.allclose(iou_matrix(a, b), [[1.0, 1 / 3, 0.0]])
    matches, ur, uc = linear_assignment(np.array([[0.1, 0.9], [0.2, 0.95]]), 0.8)
    assert matches == [(0, 0)] and ur == [1] and uc == [1]  # pairs costing > 0.8 are never matched


def test_two_objects_crossing_keep_ids():
    # A moves right, B moves left on the same row band (slightly different y), crossing at frame 10.
    frames = []
    for k in range(21):
        frames.append([_det(100 + 20 * k, 100), _det(500 - 20 * k, 108)])
    tr, ids = _run(frames)
    a_ids = {ids[k][0] for k in range(21) if 0 in ids[k]}
    b_ids = {ids[k][1] for k in range(21) if 1 in ids[k]}
    assert len(a_ids) == 1 and len(b_ids) == 1 and a_ids != b_ids
    assert tr.confirmed_ids == a_ids | b_ids


def test_missed_frames_keep_id():
    frames = []
    for k in range(20):
        frames.append([] if k in (8, 9, 10) else [_det(100 + 10 * k, 100, score=0.8)])
    tr, ids = _run(frames, lost_buffer_frames=5)
    seen = {i for d in ids for i in d.values()}
    assert len(seen) == 1


def test_lost_too_long_gets_new_id():
    frames = [[_det(100, 100)] for _ in range(5)] + [[] for _ in range(10)] + [[_det(100, 100)] for _ in range(3)]
    tr, ids = _run(frames, lost_buffer_frames=3)
    seen = [i for d in ids for i in d.values()]
    assert len(set(seen)) == 2


def test_low_score_detection_continues_track_but_does_not_start_one():
    frames = [[_det(100 + 5 * k, 100, score=0.9)] for k in range(5)]
    frames += [[_det(125 + 5 * k, 100, score=0.15)] for k in range(5)]   # occluded: weak scores
    frames += [[_det(400, 300, score=0.15)]]                             # weak lone box: no new track
    tr, ids = _run(frames)
    assert {i for d in ids[:10] for i in d.values()} == {1}
    assert ids[10] == {}


def test_class_thresholds_let_a_weakly_scored_class_start_tracks():
    # a motorcycle (class 4) scored 0.38 on every frame: below the default start score (0.5),
    # above its class's own (0.35); a car at the same score still starts nothing
    frames = [[_det(100 + 5 * k, 100, score=0.38, cls=4), _det(400, 300, score=0.38, cls=0)] for k in range(6)]
    kw = dict(high_thresh=0.45, new_track_thresh=0.5)
    tr, ids = _run(frames, **kw)
    assert all(d == {} for d in ids)
    tr, ids = _run(frames, class_thresh={4: (0.3, 0.35)}, **kw)
    assert [set(d) for d in ids] == [{0}] * 6           # only the motorcycle, one id throughout
    assert len({d[0] for d in ids}) == 1 and tr.confirmed_ids == {ids[0][0]}


def test_class_vote_is_score_weighted():
    frames = [[_det(100, 100, score=0.9, cls=0)], [_det(101, 100, score=0.5, cls=1)],
              [_det(102, 100, score=0.9, cls=0)]]
    tr, ids = _run(frames)
    assert tr.track_class(1) == 0


def _ids(frames, warps=None, **kw):
    tr = ByteTracker(**kw)
    seen = []
    for k, dets in enumerate(frames):
        pairs = tr.update(np.array(dets, dtype=np.float32).reshape(-1, 6), warp=warps[k] if warps else None)
        seen.append({di: tid for tid, di in pairs})
    return tr, seen


def test_reassociation_after_one_second_miss_keeps_id():
    # A car drifts right 12 px/frame while growing; detections vanish for 10 frames (1 s at 10 fps),
    # then come back 60 px ahead of the prediction: IoU with the predicted box is too low, the
    # re-association gate (centre distance in box heights, widened per missed frame) still holds.
    frames = []
    for k in range(30):
        if 10 <= k < 20:
            frames.append([])
            continue
        w, h = 60 + 2 * k, 40 + 1.3 * k
        x = 100 + 12 * k + (60 if k >= 20 else 0)        # it sped up while unseen
        frames.append([[x, 200 - h / 2, x + w, 200 + h / 2, 0.9, 0]])
    _, plain = _ids(frames, reassoc_radius=None)
    _, reassoc = _ids(frames)
    assert len({i for d in plain for i in d.values()}) == 2          # plain IoU association loses it
    assert len({i for d in reassoc for i in d.values()}) == 1


def test_reassociation_does_not_grab_a_far_box():
    frames = [[_det(100 + 5 * k, 100)] for k in range(5)] + [[] for _ in range(3)]
    frames += [[_det(700, 250)] for _ in range(3)]                  # another object, far away
    _, ids = _ids(frames)
    assert ids[0][0] != ids[-1][0]


def test_warp_compensation_keeps_id_under_large_global_shift():
    # The camera pans: everything static moves 90 px left per frame (more than the 60 px box width).
    frames, warps = [], []
    for k in range(12):
        frames.append([_det(900 - 90 * k, 150), _det(1000 - 90 * k, 260, w=40, h=80)])
        warps.append(None if k == 0 else np.array([[1.0, 0.0, -90.0], [0.0, 1.0, 0.0]]))
    _, plain = _ids(frames, reassoc_radius=None)
    _, comp = _ids(frames, warps, reassoc_radius=None)
    assert len({i for d in plain for i in d.values()}) > 2
    assert {d[0] for d in comp} == {comp[0][0]} and {d[1] for d in comp} == {comp[0][1]}


def test_warp_state_maps_centre_velocity_and_scale():
    from strived.perception.track import KalmanXYAH, warp_state, xyah_to_xyxy

    kf = KalmanXYAH()
    mean, cov = kf.initiate(np.array([100.0, 50.0, 1.5, 40.0]))
    mean[4:6] = [3.0, -1.0]
    warp = np.array([[2.0, 0.0, 10.0], [0.0, 2.0, -5.0]])       # zoom x2 then shift
    m2, c2 = warp_state(mean, cov, warp)
    np.testing.assert_allclose(m2[:4], [210.0, 95.0, 1.5, 80.0])
    np.testing.assert_allclose(m2[4:6], [6.0, -2.0])
    np.testing.assert_allclose(xyah_to_xyxy(m2), np.array([150, 55, 270, 135], float))
    assert c2[0, 0] == pytest.approx(4 * cov[0, 0]) and np.all(np.linalg.eigvalsh(c2) > 0)
