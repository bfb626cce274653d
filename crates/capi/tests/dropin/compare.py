# Runs drive.py under the official onnxruntime-genai package and under a copy that loads our libonnxruntime-genai.so, and reports every difference.
"""Compare the official onnxruntime-genai Python package with a copy patched to load our library.

    python compare.py [--lib OUR_LIB.so] [--env KEY=VALUE ...] [--atol 1e-5] [--atol-for PREC=X ...]
                      [--work DIR] MODEL_DIR [MODEL_DIR ...]
    python compare.py --compare-only OFFICIAL.json OURS.json [--atol ...]

Run (a) is drive.py with the installed package, untouched. Run (b) copies the installed `onnxruntime_genai`
package folder to a scratch folder, replaces `libonnxruntime-genai.so` there with --lib (without --lib the
copy is left unpatched: a self-check that must report zero differences), and runs drive.py with PYTHONPATH
pointing at the scratch folder so the copy shadows site-packages. --env variables go to run (b) only (e.g.
GENAI_BRIDGE_BACKEND=ort). Both runs use the Python that runs this script unless --python is given.

Rules: token ids, sequences, text, chat template output, stream pieces, special ids, search options,
booleans, and whether an exception was raised and its type must be equal. Float tensors (logits) must agree
within the absolute tolerance for the model's precision (--atol-for fp32=1e-5 etc., --atol otherwise); shape
and dtype exactly. When both raise, ours must have a non-empty message (messages may differ).

Every model runs in its own drive.py process; if that process dies (abort, segfault, timeout) the scenario
it was in is recorded as crashed and the run resumes after it. Exit status: 0 when no differences, 1 when
there are differences, 2 when the harness itself could not run.
"""

import argparse
import fnmatch
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVE = os.path.join(HERE, "drive.py")
LIB_NAME = "libonnxruntime-genai.so"
PRECISIONS = ("fp32", "fp16", "bf16", "int4")


# ----------------------------------------------------------------------------------------------------
# Running drive.py


def package_dir(python):
    """Folder of the installed onnxruntime_genai package for `python`, found without importing it."""
    code = ("import importlib.util,sys;s=importlib.util.find_spec('onnxruntime_genai');"
            "sys.stdout.write(s.submodule_search_locations[0] if s else '')")
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    out = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, check=False)
    path = out.stdout.strip()
    if out.returncode != 0 or not path:
        raise SystemExit("compare.py: onnxruntime_genai is not installed for %s\n%s" % (python, out.stderr))
    return path


def make_patched_copy(pkg, scratch, lib):
    """scratch/onnxruntime_genai = copy of pkg, with our library in place of the official one."""
    if os.path.exists(scratch):
        shutil.rmtree(scratch)
    os.makedirs(scratch)
    dest = os.path.join(scratch, "onnxruntime_genai")
    shutil.copytree(pkg, dest, ignore=shutil.ignore_patterns("__pycache__"))
    if lib:
        target = os.path.join(dest, LIB_NAME)
        os.remove(target)
        shutil.copy2(lib, target)
    return dest


def tail(text, n=2000):
    return text if len(text) <= n else "..." + text[-n:]


def run_drive(python, model_dir, out_json, env, timeout, max_restarts, log_path):
    """Run drive.py for one model; on a crash, record the scenario and resume after it.

    Returns the model's entry {"dir", "scenarios"} and the meta of the first run."""
    scenarios = {}
    crashed = []
    meta = None
    with open(log_path, "w", encoding="utf-8") as log:
        for attempt in range(max_restarts + 1):
            if os.path.exists(out_json):
                os.remove(out_json)
            cmd = [python, DRIVE, "--out", out_json]
            for s in scenarios:
                cmd += ["--crashed" if s in crashed else "--skip", s]
            cmd.append(model_dir)
            log.write("$ %s\n" % " ".join(cmd))
            log.flush()
            try:
                proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False,
                                      cwd=tempfile.gettempdir())
                rc, err = proc.returncode, proc.stderr
            except subprocess.TimeoutExpired as e:
                rc = "timeout after %ss" % timeout
                err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            log.write(err)
            data = None
            if os.path.exists(out_json):
                try:
                    with open(out_json, encoding="utf-8") as f:
                        data = json.load(f)
                except (OSError, ValueError):
                    data = None
            if data is None:
                return None, meta, "drive.py wrote no result (exit %s): %s" % (rc, tail(err))
            meta = meta or data["meta"]
            if not data["models"]:
                return None, meta, "drive.py recorded no model (exit %s): %s" % (rc, tail(err))
            entry = next(iter(data["models"].values()))
            scenarios.update(entry["scenarios"])
            if rc == 0 and data.get("running") is None:
                return {"dir": entry["dir"], "scenarios": scenarios}, meta, None
            running = data.get("running")
            name = running[1] if running else "<after the last scenario>"
            scenarios[name] = {"crashed": True, "exit": rc if isinstance(rc, str) else int(rc),
                               "stderr_tail": tail(err)}
            crashed.append(name)
        return {"dir": model_dir, "scenarios": scenarios}, meta, "gave up after %d restarts" % max_restarts


# ----------------------------------------------------------------------------------------------------
# Comparing results


class Diffs:
    def __init__(self):
        self.items = []  # (model, scenario, path, official, ours, what)
        self.max_abs = {}  # model -> largest |official - ours| seen in float tensors

    def add(self, model, scenario, path, official, ours, what):
        self.items.append((model, scenario, path, official, ours, what))


def is_outcome(v):
    return isinstance(v, dict) and (("raised" in v and isinstance(v["raised"], bool)) or v.get("crashed") is True)


def is_tensor(v):
    return isinstance(v, dict) and set(v) == {"shape", "dtype", "values"}


def summary(v, n=300):
    if is_tensor(v):
        return "tensor shape=%s dtype=%s" % (v["shape"], v["dtype"])
    if is_outcome(v):
        if v.get("crashed"):
            return "CRASHED (exit %s) %s" % (v.get("exit"), crash_site(v.get("stderr_tail", "")))
        if v["raised"]:
            return "raised %s: %s" % (v["type"], v["message"])
        return "returned " + summary(v["value"], n)
    s = json.dumps(v, ensure_ascii=False)
    return s if len(s) <= n else s[:n] + "..."


def crash_site(stderr):
    """The fatal error line and the innermost drive.py frame from faulthandler's dump, else the last line."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    fatal = next((ln for ln in lines if ln.startswith("Fatal Python error")), None)
    frame = next((ln for ln in lines if ln.startswith("File ") and "drive.py" in ln), None)
    if fatal or frame:
        return " | ".join(x for x in (fatal, frame) if x)
    return lines[-1][-300:] if lines else ""


def same_float(a, b, atol):
    if a is None or b is None:
        return a is b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= atol


def compare_tensor(d, model, scen, path, a, b, atol):
    if a["shape"] != b["shape"] or a["dtype"] != b["dtype"] or len(a["values"]) != len(b["values"]):
        d.add(model, scen, path, "shape %s %s" % (a["shape"], a["dtype"]), "shape %s %s" % (b["shape"], b["dtype"]),
              "tensor shape/dtype differ")
        return
    bad = []
    worst = 0.0
    for i, (x, y) in enumerate(zip(a["values"], b["values"])):
        if x is not None and y is not None and math.isfinite(x) and math.isfinite(y):
            worst = max(worst, abs(x - y))
        if not same_float(x, y, atol):
            bad.append(i)
    d.max_abs[model] = max(d.max_abs.get(model, 0.0), worst)
    if bad:
        i = max(bad, key=lambda j: abs(a["values"][j] - b["values"][j])
                if math.isfinite(a["values"][j] or 0) and math.isfinite(b["values"][j] or 0) else math.inf)
        d.add(model, scen, path, a["values"][i], b["values"][i],
              "%d of %d values differ by more than atol %g; max |diff| %.3g at flat index %d (first at %d)"
              % (len(bad), len(a["values"]), atol, worst, i, bad[0]))


def compare_value(d, model, scen, path, a, b, atol):
    if is_outcome(a) or is_outcome(b):
        if not (is_outcome(a) and is_outcome(b)):
            d.add(model, scen, path, summary(a), summary(b), "one side is an outcome, the other a value")
            return
        if a.get("crashed") or b.get("crashed"):
            if not (a.get("crashed") and b.get("crashed")):
                d.add(model, scen, path, summary(a), summary(b), "process crashed")
            return
        if a["raised"] != b["raised"]:
            what = "official raised, ours did not" if a["raised"] else "ours raised, official did not"
            d.add(model, scen, path, summary(a), summary(b), what)
            return
        if a["raised"]:
            if a["type"] != b["type"]:
                d.add(model, scen, path, a["type"], b["type"], "exception type differs")
            if not str(b.get("message", "")).strip():
                d.add(model, scen, path, a["message"], b.get("message"), "ours raised with an empty message")
            return
        compare_value(d, model, scen, path, a["value"], b["value"], atol)
        return
    if is_tensor(a) and is_tensor(b):
        compare_tensor(d, model, scen, path, a, b, atol)
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a:
            if k not in b:
                d.add(model, scen, path + "/" + k, summary(a[k]), "<missing>", "key missing in ours")
        for k in b:
            if k not in a:
                d.add(model, scen, path + "/" + k, "<missing>", summary(b[k]), "extra key in ours")
        for k in a:
            if k in b:
                compare_value(d, model, scen, path + "/" + k, a[k], b[k], atol)
        return
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b) and not any(isinstance(x, (dict, list)) for x in a + b):
            d.add(model, scen, path, summary(a), summary(b), "lists differ (length %d vs %d)" % (len(a), len(b)))
            return
        if len(a) != len(b):
            d.add(model, scen, path, summary(a), summary(b), "list length %d vs %d" % (len(a), len(b)))
        flat = not any(isinstance(x, (dict, list)) for x in a + b)
        if flat:
            if a != b or any(type(x) is not type(y) for x, y in zip(a, b)):
                first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y or type(x) is not type(y)), None)
                d.add(model, scen, path, summary(a), summary(b), "lists differ at index %s" % first)
            return
        for i, (x, y) in enumerate(zip(a, b)):
            compare_value(d, model, scen, "%s[%d]" % (path, i), x, y, atol)
        return
    # Scalars: exact, and bool is not int.
    if type(a) is not type(b) and not (isinstance(a, (int, float)) and isinstance(b, (int, float))
                                       and not isinstance(a, bool) and not isinstance(b, bool)):
        d.add(model, scen, path, summary(a), summary(b), "types differ")
    elif a != b:
        d.add(model, scen, path, summary(a), summary(b), "values differ")


def guess_precision(name, model_dir, overrides):
    if name in overrides:
        return overrides[name]
    for p in PRECISIONS:
        if re.search(r"(^|[-_.])%s($|[-_.])" % p, name):
            return p
    if model_dir and os.path.isdir(model_dir):
        for f in os.listdir(model_dir):
            path = os.path.join(model_dir, f)
            if f.endswith(".onnx") and os.path.getsize(path) < (256 << 20):
                with open(path, "rb") as fh:
                    if b"MatMulNBits" in fh.read():
                        return "int4"
    return "fp32"


def compare_models(official, ours, tol_for, default_atol, overrides, diffs, notes):
    for model, a in official["models"].items():
        b = ours["models"].get(model)
        if b is None:
            diffs.add(model, "-", "", "present", "<missing>", "model missing in ours")
            continue
        prec = guess_precision(model, a.get("dir"), overrides)
        atol = tol_for.get(prec, default_atol)
        notes.append("%s: precision %s, logits atol %g" % (model, prec, atol))
        sa, sb = a["scenarios"], b["scenarios"]
        for scen in list(sa) + [s for s in sb if s not in sa]:
            if scen not in sb:
                diffs.add(model, scen, "", summary(sa[scen]), "<missing>", "scenario missing in ours")
            elif scen not in sa:
                diffs.add(model, scen, "", "<missing>", summary(sb[scen]), "scenario missing in official")
            else:
                compare_value(diffs, model, scen, "", sa[scen], sb[scen], atol)
    for model in ours["models"]:
        if model not in official["models"]:
            diffs.add(model, "-", "", "<missing>", "present", "model only in ours")


def accept_known(diffs, known_path, mode):
    """Moves differences that a known_differences.json entry covers out of diffs.items; returns
    the accepted ones with their reasons."""
    if not known_path:
        return []
    with open(known_path, encoding="utf-8") as f:
        entries = json.load(f)["entries"]
    accepted, kept = [], []
    for item in diffs.items:
        model, scen, path = item[0], item[1], item[1] + item[2]
        reason = None
        for e in entries:
            if mode not in e.get("modes", []):
                continue
            if not fnmatch.fnmatchcase(model, e.get("model", "*")):
                continue
            if fnmatch.fnmatchcase(scen, e["scenario"]) or fnmatch.fnmatchcase(path, e["scenario"]):
                reason = e["reason"]
                break
        if reason is None:
            kept.append(item)
        else:
            accepted.append((item, reason))
    diffs.items = kept
    return accepted


def print_accepted(accepted, out=sys.stdout):
    if not accepted:
        return
    print("ACCEPTED (known differences, see known_differences.json): %d" % len(accepted), file=out)
    for (model, scen, path, _a, _b, what), reason in accepted:
        print("  ~ %s [%s%s] %s -- %s" % (model, scen, path, what, reason), file=out)


def print_report(diffs, notes, out=sys.stdout):
    for n in notes:
        print("  " + n, file=out)
    if diffs.max_abs:
        print("largest |logit difference| per model (within tolerance or not):", file=out)
        for m, v in sorted(diffs.max_abs.items()):
            print("  %-28s %.3g" % (m, v), file=out)
    if not diffs.items:
        print("RESULT: no differences", file=out)
        return
    print("RESULT: %d difference(s)" % len(diffs.items), file=out)
    by_model = {}
    for item in diffs.items:
        by_model.setdefault(item[0], []).append(item)
    for model, items in by_model.items():
        print("=== %s: %d difference(s)" % (model, len(items)), file=out)
        for _, scen, path, a, b, what in items:
            print("  - [%s%s] %s" % (scen, path, what), file=out)
            print("      official: %s" % (a if isinstance(a, str) else summary(a)), file=out)
            print("      ours:     %s" % (b if isinstance(b, str) else summary(b)), file=out)


# ----------------------------------------------------------------------------------------------------


def parse_kv(items, what):
    out = {}
    for it in items:
        if "=" not in it:
            raise SystemExit("compare.py: %s expects KEY=VALUE, got %r" % (what, it))
        k, v = it.split("=", 1)
        out[k] = v
    return out


def official_cache_key(python, pkg, model_dir):
    h = hashlib.sha256()
    with open(DRIVE, "rb") as f:
        h.update(f.read())
    h.update(os.path.abspath(python).encode() + b"\0" + pkg.encode() + b"\0")
    with open(os.path.join(pkg, LIB_NAME), "rb") as f:
        h.update(hashlib.sha256(f.read()).digest())
    for name in sorted(os.listdir(model_dir)):
        st = os.stat(os.path.join(model_dir, name))
        h.update(("%s:%d:%d;" % (name, st.st_size, int(st.st_mtime))).encode())
    return h.hexdigest()[:16]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", help="model folders")
    ap.add_argument("--python", default=sys.executable, help="Python with onnxruntime-genai installed")
    ap.add_argument("--lib", help="our libonnxruntime-genai.so (cdylib); without it run (b) is an unpatched copy")
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="extra environment for run (b)")
    ap.add_argument("--atol", type=float, default=1e-5, help="logits tolerance when no --atol-for matches")
    ap.add_argument("--atol-for", action="append", default=[], metavar="PREC=X",
                    help="logits tolerance for a precision (fp32, fp16, bf16, int4)")
    ap.add_argument("--precision", action="append", default=[], metavar="MODEL=PREC",
                    help="precision of a model (by folder name) when the name does not say")
    ap.add_argument("--work", help="folder for results, logs and the package copy (default: a temporary one)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per drive.py process")
    ap.add_argument("--max-restarts", type=int, default=20, help="crash restarts per model")
    ap.add_argument("--official-cache", metavar="DIR",
                    help="keep official results here and reuse them while drive.py, the python and the model "
                         "files are unchanged")
    ap.add_argument("--report", help="also write the differences as JSON here")
    ap.add_argument("--known", help="JSON list of accepted differences (known_differences.json)")
    ap.add_argument("--mode", default="ort", help="test mode the --known entries are selected by")
    ap.add_argument("--compare-only", nargs=2, metavar=("OFFICIAL_JSON", "OURS_JSON"),
                    help="compare two drive.py outputs without running anything")
    args = ap.parse_args()

    tol_for = {k: float(v) for k, v in parse_kv(args.atol_for, "--atol-for").items()}
    for k in tol_for:
        if k not in PRECISIONS:
            raise SystemExit("compare.py: unknown precision %r in --atol-for" % k)
    overrides = parse_kv(args.precision, "--precision")
    diffs, notes = Diffs(), []

    if args.compare_only:
        with open(args.compare_only[0], encoding="utf-8") as f:
            official = json.load(f)
        with open(args.compare_only[1], encoding="utf-8") as f:
            ours = json.load(f)
        compare_models(official, ours, tol_for, args.atol, overrides, diffs, notes)
        print_accepted(accept_known(diffs, args.known, args.mode))
        print_report(diffs, notes)
        return 1 if diffs.items else 0

    if not args.models:
        ap.error("give model folders (or --compare-only)")
    for m in args.models:
        if not os.path.isfile(os.path.join(m, "genai_config.json")):
            raise SystemExit("compare.py: %s is not a model folder (no genai_config.json)" % m)
    if args.lib and not os.path.isfile(args.lib):
        raise SystemExit("compare.py: --lib %s is not a file" % args.lib)
    work = args.work or tempfile.mkdtemp(prefix="genai-dropin-")
    os.makedirs(work, exist_ok=True)
    work = os.path.abspath(work)
    pkg = package_dir(args.python)
    scratch = os.path.join(work, "patched")
    copy = make_patched_copy(pkg, scratch, os.path.abspath(args.lib) if args.lib else None)

    env_a = dict(os.environ)
    env_a.pop("PYTHONPATH", None)
    env_a["PYTHONDONTWRITEBYTECODE"] = "1"
    env_b = dict(env_a)
    env_b["PYTHONPATH"] = scratch
    env_b.update(parse_kv(args.env, "--env"))

    print("compare.py: official package %s" % pkg)
    print("compare.py: patched copy    %s (library: %s)" % (copy, args.lib or "UNPATCHED official copy (self-check)"))
    if args.env:
        print("compare.py: run (b) env     %s" % " ".join(args.env))
    official = {"models": {}}
    ours = {"models": {}}
    harness_errors = []
    for model_dir in args.models:
        model_dir = os.path.abspath(model_dir)
        name = os.path.basename(os.path.normpath(model_dir))
        for side, env, store in (("official", env_a, official), ("ours", env_b, ours)):
            side_dir = os.path.join(work, side)
            os.makedirs(side_dir, exist_ok=True)
            out_json = os.path.join(side_dir, name + ".json")
            cached = None
            if side == "official" and args.official_cache:
                os.makedirs(args.official_cache, exist_ok=True)
                cached = os.path.join(args.official_cache,
                                      "%s.%s.json" % (name, official_cache_key(args.python, pkg, model_dir)))
                if os.path.exists(cached):
                    with open(cached, encoding="utf-8") as f:
                        store["models"][name] = json.load(f)
                    print("compare.py: %-28s official (cached)" % name)
                    continue
            entry, meta, err = run_drive(args.python, model_dir, out_json, env, args.timeout, args.max_restarts,
                                         os.path.join(side_dir, name + ".log"))
            if meta is not None:
                lib = meta.get("genai_library") or ""
                inside = lib.startswith(scratch + os.sep)
                if (side == "ours") != inside:
                    harness_errors.append("%s run for %s loaded the wrong library: %s" % (side, name, lib))
            if err and side == "official":
                harness_errors.append("official run for %s: %s" % (name, err))
            elif err:
                diffs.add(name, "-", "", "drive.py ran", err, "our run failed")
            if entry is None:
                continue
            store["models"][name] = entry
            crashed = [s for s, o in entry["scenarios"].items() if isinstance(o, dict) and o.get("crashed")]
            print("compare.py: %-28s %-8s %d scenarios%s" % (name, side, len(entry["scenarios"]),
                                                            ", CRASHED in: " + ", ".join(crashed) if crashed else ""))
            if side == "official" and cached and not crashed and not err:
                with open(cached, "w", encoding="utf-8") as f:
                    json.dump(entry, f, ensure_ascii=False)
    with open(os.path.join(work, "official.json"), "w", encoding="utf-8") as f:
        json.dump(official, f, ensure_ascii=False)
    with open(os.path.join(work, "ours.json"), "w", encoding="utf-8") as f:
        json.dump(ours, f, ensure_ascii=False)

    compare_models(official, ours, tol_for, args.atol, overrides, diffs, notes)
    print("compare.py: results in %s (official.json, ours.json, per-model logs)" % work)
    print_accepted(accept_known(diffs, args.known, args.mode))
    print_report(diffs, notes)
    if args.report:
        with open(args.report, "w", encoding="utf-8") as f:
            json.dump([{"model": m, "scenario": s, "path": p, "official": a, "ours": b, "what": w}
                       for m, s, p, a, b, w in diffs.items], f, ensure_ascii=False, indent=1, default=str)
    if harness_errors:
        print("HARNESS ERRORS:")
        for e in harness_errors:
            print("  " + e)
        return 2
    return 1 if diffs.items else 0


if __name__ == "__main__":
    sys.exit(main())
