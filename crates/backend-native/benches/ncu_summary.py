"""Per-kernel device time from an `ncu --csv --metrics gpu__time_duration.sum` log: one line per
kernel and grid, most time first. Used by cuda_h200.sh and fusion_check_h200.sh."""
import collections
import csv
import sys

rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10 and not r[0].startswith("{")]
if not rows:
    sys.exit("no ncu rows")
head, body = rows[0], rows[1:]
name, unit, value = head.index("Kernel Name"), head.index("Metric Unit"), head.index("Metric Value")
grid = head.index("Grid Size")
total = collections.defaultdict(float)
count = collections.Counter()
for r in body:
    v = float(r[value].replace(",", "")) * (1e-3 if r[unit] in ("ns", "nsecond") else 1.0)
    key = f"{r[name]} {r[grid]}"
    total[key] += v
    count[key] += 1
all_us = sum(total.values())
for k, v in sorted(total.items(), key=lambda kv: -kv[1]):
    print(f"{k[:48]:<48} {count[k]:>5} launches {v:>10.1f} us {100 * v / all_us:5.1f}%  {v / count[k]:7.2f} us each")
