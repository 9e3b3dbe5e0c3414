import sys, numpy as np
from strived.store.library import Library
ref = sys.argv[2]  # "end" or "start"
lib = Library.open(sys.argv[1])
n = 0
for v in lib.video_ids():
    r = lib.get_video(v)
    w = np.asarray(r.ego.get("yaw_rate"), float)
    w = np.where(np.isfinite(w), w, 0.0)
    for tr in r.tracks:
        t = r.t[tr.pos]; z = np.asarray(tr.fields["distance"], float); x = np.asarray(tr.fields["loc_x"], float)
        zz = np.where(np.isfinite(z), z, np.nan)
        rate = zz * w[tr.pos]          # apparent lateral velocity from the ego's rotation (+right for a left turn)
        rate = np.where(np.isfinite(rate), rate, 0.0)
        cum = np.concatenate([[0.0], np.cumsum(0.5 * (rate[1:] + rate[:-1]) * np.diff(t))])
        cum -= cum[-1] if ref == "end" else 0.0
        tr.fields["loc_x"] = (x - cum).astype(np.float32)
        n += 1
    lib.add_video(r, replace=True)
print("tracks", n)
