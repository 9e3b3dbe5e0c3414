"""ccd_000838 through the whole perception: the product's speed vs the burnt-in reading."""
import json, sys, numpy as np
from strived.perception.pipeline import perceive_video, PerceptionConfig
from strived.perception.burnin import read_burnin
clip = '/work/shared/data/bench-dev/videos/ccd_000838.mp4'
res = perceive_video(clip)
rec = res.records
ref = read_burnin(clip, every_s=0.5)          # the overlay, read twice a second, as the reference
tr, sr = ref.speed_mps()
sp = rec.ego["speed"]
# reference on each frame: the last overlay value shown (it changes once a second)
idx = np.searchsorted(tr, rec.t, side="right") - 1
refv = np.where(idx >= 0, sr[np.clip(idx, 0, len(sr) - 1)], np.nan)
both = np.isfinite(sp) & np.isfinite(refv)
rel = np.abs(sp[both] - refv[both]) / refv[both]
noburn = perceive_video(clip, config=PerceptionConfig(burnin=False)).records
out = {"availability_speed": rec.info.attrs["availability"]["speed"], "burnin": rec.info.attrs["burnin"],
       "frames": int(len(rec.t)), "frames_with_speed": int(np.isfinite(sp).sum()),
       "frames_compared": int(both.sum()), "median_rel_err": float(np.median(rel)), "max_rel_err": float(rel.max()),
       "mean_speed_kmh": float(np.nanmean(sp) * 3.6), "mean_overlay_kmh": float(np.nanmean(refv) * 3.6),
       "without_burnin_speed_frames": int(np.isfinite(noburn.ego["speed"]).sum()),
       "without_burnin_availability": noburn.info.attrs["availability"]["speed"]}
print(json.dumps(out, indent=1))
json.dump(out, open(sys.argv[1], "w"), indent=1)
