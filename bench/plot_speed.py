#!/usr/bin/env python3
"""Draws ds4-bench CSVs as an SVG chart: prefill t/s (top) and decode t/s (bottom) against
the context frontier. Several CSVs (e.g. ds4-bench and ds4-peer-bench on the same machine)
become several series. Pure standard library.

  bench/plot_speed.py out.csv [more.csv ...] [--labels ds4,llama.cpp] [--title T] [-o out.svg]
"""
import argparse
import csv
import math
import sys
from xml.sax.saxutils import escape

COLUMNS = ["ctx_tokens", "prefill_tokens", "prefill_tps", "gen_tokens", "gen_tps",
           "kvcache_bytes"]
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
W, PANEL_H, LEFT, RIGHT, TOP, GAP, BOTTOM = 760, 230, 70, 150, 50, 60, 50


def read_rows(path):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: not a ds4-bench CSV (missing columns: "
                             f"{', '.join(missing)}; expected {','.join(COLUMNS)})")
        rows = []
        for i, r in enumerate(reader, start=2):
            try:
                rows.append({"ctx": int(r["ctx_tokens"]), "prefill": float(r["prefill_tps"]),
                             "gen_tokens": int(r["gen_tokens"]), "gen": float(r["gen_tps"])})
            except (TypeError, ValueError):
                raise ValueError(f"{path}:{i}: malformed row {r}")
    if not rows:
        raise ValueError(f"{path}: no rows")
    return rows


def nice_max(v):
    """The smallest 1/2/5 x 10^k at or above v (at least a tiny positive value)."""
    if v <= 0 or not math.isfinite(v):
        return 1.0
    e = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 5, 10):
        if m * e >= v:
            return m * e
    return 10 * e


def fmt(v):
    return f"{v:g}" if v < 1000 else f"{v / 1000:g}k"


def panel(out, y0, title, series, key, xmax):
    """One panel: axes, grid, and a line + circles per series (class = key's series name)."""
    cls = "prefill" if key == "prefill" else "decode"
    h = PANEL_H
    plot_w = W - LEFT - RIGHT
    vals = [r[key] for _, rows in series for r in rows if key != "gen" or r["gen_tokens"] > 0]
    ymax = nice_max(max(vals) if vals else 0)
    out.append(f'<text x="{LEFT}" y="{y0 - 10}" class="axis-title">{escape(title)}</text>')
    for k in range(5):
        v = ymax * k / 4
        y = y0 + h - h * k / 4
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + plot_w}" y2="{y:.1f}" class="grid"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{fmt(v)}</text>')
    for k in range(5):
        v = xmax * k / 4
        x = LEFT + plot_w * k / 4
        out.append(f'<line x1="{x:.1f}" y1="{y0 + h}" x2="{x:.1f}" y2="{y0 + h + 4}" class="axis"/>')
        out.append(f'<text x="{x:.1f}" y="{y0 + h + 18}" text-anchor="middle">{fmt(v)}</text>')
    out.append(f'<rect x="{LEFT}" y="{y0}" width="{plot_w}" height="{h}" class="frame"/>')
    if not vals:
        out.append(f'<text x="{LEFT + plot_w / 2}" y="{y0 + h / 2}" text-anchor="middle">'
                   f'no decode probe (gen_tokens 0)</text>')
    for i, (label, rows) in enumerate(series):
        color = COLORS[i % len(COLORS)]
        pts = [(LEFT + plot_w * r["ctx"] / xmax, y0 + h - h * r[key] / ymax)
               for r in rows if key != "gen" or r["gen_tokens"] > 0]
        if len(pts) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
            out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        for x, y in pts:
            out.append(f'<circle class="{cls}" cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>')


def render(series, title):
    xmax = nice_max(max(r["ctx"] for _, rows in series for r in rows))
    height = TOP + 2 * PANEL_H + GAP + BOTTOM
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" '
           f'viewBox="0 0 {W} {height}" font-family="sans-serif" font-size="12">',
           "<style>.grid{stroke:#ddd}.axis{stroke:#333}.frame{fill:none;stroke:#333}"
           ".axis-title{font-weight:bold}</style>",
           f'<rect width="{W}" height="{height}" fill="white"/>',
           f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="15" '
           f'font-weight="bold">{escape(title)}</text>']
    panel(out, TOP, "prefill t/s (tokens of the interval since the previous frontier)",
          series, "prefill", xmax)
    y1 = TOP + PANEL_H + GAP
    panel(out, y1, "decode t/s (greedy probe at the frontier)", series, "gen", xmax)
    out.append(f'<text x="{LEFT + (W - LEFT - RIGHT) / 2}" y="{height - 10}" '
               f'text-anchor="middle">context (tokens)</text>')
    for i, (label, _) in enumerate(series):
        y = TOP + 14 + 18 * i
        color = COLORS[i % len(COLORS)]
        out.append(f'<rect x="{W - RIGHT + 14}" y="{y - 9}" width="12" height="12" fill="{color}"/>')
        out.append(f'<text x="{W - RIGHT + 32}" y="{y + 1}">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="+", help="ds4-bench / ds4-peer-bench CSV files")
    ap.add_argument("--labels", help="comma-separated series names (default: file names)")
    ap.add_argument("--title", default="ds4-bench", help="chart title")
    ap.add_argument("-o", "--output", help="SVG file to write (default: stdout)")
    a = ap.parse_args(argv)
    labels = a.labels.split(",") if a.labels else a.csv
    if len(labels) != len(a.csv):
        ap.error(f"--labels has {len(labels)} names for {len(a.csv)} files")
    try:
        series = [(label, read_rows(path)) for label, path in zip(labels, a.csv)]
    except (OSError, ValueError) as e:
        print(f"plot_speed.py: {e}", file=sys.stderr)
        return 1
    svg = render(series, a.title)
    if a.output:
        with open(a.output, "w") as f:
            f.write(svg)
    else:
        sys.stdout.write(svg)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
