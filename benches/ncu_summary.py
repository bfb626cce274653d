"""Per-kernel device time (and DRAM read bandwidth, when the log has `dram__bytes_read.sum`) from
an `ncu --csv --metrics gpu__time_duration.sum[,dram__bytes_read.sum]` log: one line per kernel
and grid, most time first. Used by check_h200.sh."""
import collections
import csv
import sys

UNITS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3,
         "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9}

rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10 and not r[0].startswith("{")]
if not rows:
    sys.exit("no ncu rows")
head, body = rows[0], rows[1:]
col = {k: head.index(k) for k in ("ID", "Kernel Name", "Grid Size", "Metric Name", "Metric Unit", "Metric Value")}
time_us = collections.defaultdict(float)
read_bytes = collections.defaultdict(float)
launches = collections.defaultdict(set)
for r in body:
    key = f"{r[col['Kernel Name']]} {r[col['Grid Size']]}"
    value = float(r[col["Metric Value"]].replace(",", "")) * UNITS.get(r[col["Metric Unit"]], 1.0)
    launches[key].add(r[col["ID"]])
    if r[col["Metric Name"]].startswith("gpu__time_duration"):
        time_us[key] += value
    elif r[col["Metric Name"]].startswith("dram__bytes_read"):
        read_bytes[key] += value
all_us = sum(time_us.values())
print(f"{'kernel grid':<56} {'launches':>8} {'total us':>10} {'share':>6} {'us each':>8} {'MB each':>8} {'GB/s':>7}")
for k, v in sorted(time_us.items(), key=lambda kv: -kv[1]):
    n = len(launches[k])
    mb = read_bytes[k] / n / 1e6 if k in read_bytes else float("nan")
    gbs = read_bytes[k] / (v * 1e3) if k in read_bytes and v > 0 else float("nan")
    print(f"{k[:56]:<56} {n:>8} {v:>10.1f} {100 * v / all_us:5.1f}% {v / n:8.2f} {mb:8.2f} {gbs:7.0f}")
print(f"total {all_us:.1f} us over {sum(len(s) for s in launches.values())} launches")
