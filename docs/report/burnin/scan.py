"""Which clips have a burnt-in speed the OCR reads (bench-dev + bench-unseen)."""
import glob, json, sys, time
from strived.perception.burnin import read_burnin
out = {}
for f in sorted(glob.glob('/work/shared/data/bench-dev/videos/*.mp4')) + sorted(glob.glob('/work/shared/data/bench-unseen/videos/*.mp4')):
    t = time.time()
    b = read_burnin(f)
    s = b.summary(); s["seconds"] = round(time.time() - t, 1)
    s["values"] = [r.value for r in b.accepted()]
    out[f.split('/')[-3] + '/' + f.split('/')[-1]] = s
    print(f.split('/')[-1], s["status"], s.get("accepted"), s["values"], s["seconds"], flush=True)
json.dump(out, open(sys.argv[1], 'w'), indent=1)
