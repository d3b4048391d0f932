#!/usr/bin/env python3
"""Rewrite the measured column of BENCHMARKS.md from criterion's output and figure scripts.

Run through `benches/update-figures.sh` (which runs the benchmarks first), or alone to
re-read the results already on disk:

    python3 benches/update_figures.py [--file BENCHMARKS.md] [--check]

A table row is rewritten when its first cell is one backticked id:

- `group/name` (any depth, e.g. `protocol/blocks/4000`): the median of
  <target>/criterion/<group>/<name>/new/estimates.json, as a time (`9.3 µs`), or as a
  throughput (`184 MB/s`) when the benchmark declares one;
- a row id from a figure script's <target>/bench-figures/<script>.json
  ({"row id": "formatted figure"}); figure-script ids win over criterion ids;
- `a ÷ b` with two ids: the ratio of their medians (`40.6×`), a derived row.

The second cell becomes the figure; when the third cell is a simple target (`≤ 10 µs`,
`≥ 300 MB/s`, `≤ 45×`, `≤ 0.65×`) the fourth becomes `yes` or `**no**`. Rows whose id has
no data are left as they are and listed on stderr. A line starting with
"Figures regenerated" is replaced by a stamp with the commit and date.
"""

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAMP_PREFIX = "Figures regenerated"


def target_dir() -> Path:
    t = os.environ.get("CARGO_TARGET_DIR")
    return Path(t) if t else ROOT / "target"


# ---------------------------------------------------------------- formatting


def sig(x: float) -> str:
    """Three significant digits, no exponent."""
    if x == 0:
        return "0"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def fmt_time(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{sig(ns / scale)} {unit}"
    return f"{sig(ns)} ns"


def fmt_rate(per_s: float, unit: str) -> str:
    for prefix, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if per_s >= scale:
            return f"{sig(per_s / scale)} {prefix}{unit}/s"
    return f"{sig(per_s)} {unit}/s"


# ---------------------------------------------------------------- reading figures

TIME_UNITS = {"ns": 1.0, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9}
SIZE_UNITS = {"B": 1.0, "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 1024.0, "MiB": 1024.0**2,
              "GiB": 1024.0**3}
NUM = r"([0-9][0-9,]*(?:\.[0-9]+)?)"


def quantity(text: str):
    """`9.3 µs` → ('time', 9300.0); `184 MB/s` → ('rate', 1.84e8); `40.6×` → ('ratio', 40.6)."""
    t = text.replace("*", "").strip()
    m = re.search(NUM + r"\s*([A-Za-zµ]+/s|×|x\b|[A-Za-zµ]+)?", t)
    if not m:
        return None
    v = float(m.group(1).replace(",", ""))
    u = (m.group(2) or "").strip()
    if u in ("×", "x"):
        return ("ratio", v)
    if u in TIME_UNITS:
        return ("time", v * TIME_UNITS[u])
    if u.endswith("/s"):
        base = u[:-2]
        if base in SIZE_UNITS:
            return ("rate", v * SIZE_UNITS[base])
        for p, s in (("G", 1e9), ("M", 1e6), ("K", 1e3), ("", 1.0)):
            if base.startswith(p) and base[len(p):]:
                return ("rate:" + base[len(p):], v * s)
    if u in SIZE_UNITS:
        return ("size", v * SIZE_UNITS[u])
    if u == "":
        return ("number", v)
    return None


def met(measured: str, target: str):
    m = re.match(r"\s*(≤|<=|≥|>=|<|>)\s*(.+)$", target.replace("*", ""))
    if not m:
        return None
    a, b = quantity(measured), quantity(m.group(2))
    if not a or not b or a[0] != b[0]:
        return None
    op = m.group(1)
    ok = {"≤": a[1] <= b[1], "<=": a[1] <= b[1], "<": a[1] < b[1],
          "≥": a[1] >= b[1], ">=": a[1] >= b[1], ">": a[1] > b[1]}[op]
    return "yes" if ok else "**no**"


class Criterion:
    def __init__(self, base: Path):
        self.base = base

    def median(self, bench_id: str):
        d = self.base.joinpath(*bench_id.split("/"))
        est = d / "new" / "estimates.json"
        if not est.is_file():
            return None
        ns = json.loads(est.read_text())["median"]["point_estimate"]
        throughput = None
        bj = d / "new" / "benchmark.json"
        if bj.is_file():
            throughput = json.loads(bj.read_text()).get("throughput")
        return ns, throughput

    def figure(self, bench_id: str):
        got = self.median(bench_id)
        if got is None:
            return None
        ns, tp = got
        if isinstance(tp, dict) and ns > 0:
            if "Bytes" in tp or "BytesDecimal" in tp:
                n = tp.get("Bytes", tp.get("BytesDecimal"))
                return fmt_rate(n / (ns * 1e-9), "B")
            if "Elements" in tp:
                return fmt_rate(tp["Elements"] / (ns * 1e-9), "elem")
        return fmt_time(ns)


def load_figure_scripts(d: Path):
    out = {}
    if d.is_dir():
        for f in sorted(d.glob("*.json")):
            try:
                data = json.loads(f.read_text())
            except json.JSONDecodeError as e:
                print(f"warning: {f} is not JSON ({e}); skipped", file=sys.stderr)
                continue
            for k, v in data.items():
                out[k] = str(v)
    return out


# ---------------------------------------------------------------- rewriting

ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|")


def split_row(line: str):
    cells = line.strip().strip("|").split("|")
    return [c.strip() for c in cells]


def stamp() -> str:
    def git(*args):
        r = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return r.stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = " (dirty: uncommitted changes)" if git("status", "--porcelain", "-uno") else ""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = ""
    try:
        load = f", load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    except OSError:
        pass
    return (f"{STAMP_PREFIX} by `benches/update-figures.sh` at commit `{commit}`{dirty} "
            f"on {now}{load}.")


def rewrite(text: str, figures: dict, crit: Criterion):
    out, updated, missing = [], [], []
    for line in text.splitlines():
        m = ROW.match(line)
        if line.startswith(STAMP_PREFIX):
            out.append(stamp())
            continue
        if not m:
            out.append(line)
            continue
        rid = m.group(1).strip()
        cells = split_row(line)
        if len(cells) < 2:
            out.append(line)
            continue
        value = figures.get(rid)
        if value is None and "÷" in rid:
            a, _, b = (p.strip() for p in rid.partition("÷"))
            ma, mb = crit.median(a), crit.median(b)
            if ma and mb and mb[0] > 0:
                value = f"{ma[0] / mb[0]:.2f}×"
        if value is None and "/" in rid and " " not in rid:
            value = crit.figure(rid)
        if value is None:
            missing.append(rid)
            out.append(line)
            continue
        cells[1] = value
        if len(cells) >= 4:
            verdict = met(value, cells[2])
            if verdict:
                cells[3] = verdict
        updated.append(rid)
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + ("\n" if text.endswith("\n") else ""), updated, missing


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", default=str(ROOT / "BENCHMARKS.md"))
    ap.add_argument("--check", action="store_true",
                    help="print what would change; do not write")
    args = ap.parse_args()
    tdir = target_dir()
    figures = load_figure_scripts(Path(os.environ.get("BENCH_FIGURES_DIR", tdir / "bench-figures")))
    crit = Criterion(tdir / "criterion")
    path = Path(args.file)
    text = path.read_text()
    new, updated, missing = rewrite(text, figures, crit)
    print(f"{len(updated)} rows updated in {path.name}", file=sys.stderr)
    if missing:
        print(f"{len(missing)} rows have no data (left as they were): " + ", ".join(missing),
              file=sys.stderr)
    if args.check:
        sys.stdout.write(new)
    elif new != text:
        path.write_text(new)


if __name__ == "__main__":
    main()
