"""What a tune leaves: the table (printed and table.txt), the winner's Environment (environment.json, for
CreateModel) and KEY=VALUE lines (environment.env), every measurement (results.json), and report.html: a page of
its own (inline SVG, no script, no plotting library) with throughput against p99 for each setting, the bound drawn
and the winner marked."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .load import Measurement
from .trial import Trial
from .usage import GroupUsage

SHOWN_GROUPS = ("nginx", "gunicorn", "model servers")  # serve itself idles while the others work


@dataclass
class Context:
    """What the page says besides the trials: the machine, the generator, the bound's origin."""

    model: str
    payload: str
    cores: int
    memory_gb: float
    generator: str
    bound_ms: float
    bound_origin: str
    budget_s: float
    elapsed_s: float
    seed: int
    ceiling: Measurement | None  # the generator against a bare nginx
    warnings: list[str]
    recheck: str | None = None  # the winner measured again against the defaults
    notes: list[str] = field(default_factory=list)  # what the tune decided from its measurements


def _ms(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:.0f}"


def rate_cell(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def usage_cell(groups: GroupUsage | None, group: str) -> str:
    """A group's CPU (cores busy) and resident memory, as one table cell."""
    if groups is None:
        return "-"
    return f"{groups.cores[group]:.2f}c/{groups.rss_mb[group]:.0f}MB"


def table_rows(trials: Sequence[Trial], winner: Trial | None) -> list[list[str]]:
    header = ["#", "setting", "req/s@bound", "conc", "p50 ms", "p90 ms", "p99 ms", "open loop p99 ms @ req/s"]
    header += ["gen CPU", *(f"{g} CPU/RSS" for g in SHOWN_GROUPS)]
    rows = [header]
    for trial in trials:
        best = trial.best
        mark = "*" if trial is winner else ""
        row = [f"{trial.number}{mark}", trial.description]
        if trial.error:
            rows.append([*row, "-", "-", "-", "-", "-", "-", "-", *("-" for _ in SHOWN_GROUPS), trial.error])
            continue
        shown = best or (trial.levels[0] if trial.levels else None)
        opened = trial.open_loop
        row += [
            rate_cell(trial.score),
            str(shown.concurrency) if shown else "-",
            _ms(shown.p50_ms) if shown else "-",
            _ms(shown.p90_ms) if shown else "-",
            _ms(shown.p99_ms) if shown else "-",
            f"{_ms(opened.p99_ms)} @ {rate_cell(opened.offered_rate or 0)}" if opened else "-",
            f"{shown.generator_cpu:.2f}c" if shown else "-",
            *(usage_cell(shown.groups if shown else None, g) for g in SHOWN_GROUPS),
        ]
        if best is None:
            row.append("p99 over the bound at every concurrency")
        elif opened and not trial.open_loop_behind and not trial.open_loop_held:
            row.append("open-loop p99 over the bound")
        if opened and trial.open_loop_behind:
            row.append(f"open loop not counted: the generator sent {_ms(opened.behind_ms)} ms late (p99)")
        rows.append(row)
    return rows


def render_table(trials: Sequence[Trial], winner: Trial | None) -> str:
    return text_table(table_rows(trials, winner))


def text_table(rows: list[list[str]]) -> str:
    """Rows (the header first) as aligned columns; a row may be longer than the header (its notes)."""
    width = max(len(r) for r in rows)
    widths = [max(len(r[i]) for r in rows if i < len(r)) for i in range(width)]
    return "\n".join("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip() for r in rows)


def write_environment(out: Path, environment: dict[str, str]) -> None:
    (out / "environment.json").write_text(json.dumps(environment, indent=2, sort_keys=True) + "\n")
    (out / "environment.env").write_text("".join(f"{k}={v}\n" for k, v in sorted(environment.items())))


def _measurement_dict(m: Measurement | None) -> dict[str, Any] | None:
    if m is None:
        return None
    result = asdict(m)
    result["rate"] = m.rate
    return result


def write_results(out: Path, context: Context, trials: Sequence[Trial], winner: Trial | None) -> None:
    document = {
        "context": {**asdict(context), "ceiling": _measurement_dict(context.ceiling)},
        "winner": winner.number if winner else None,
        "trials": [
            {
                "number": t.number,
                "setting": t.description,
                "environment": t.environment,
                "score_requests_per_s": t.score,
                "error": t.error,
                "start_seconds": t.start_seconds,
                "seconds": t.seconds,
                "levels": [_measurement_dict(m) for m in t.levels],
                "open_loop": _measurement_dict(t.open_loop),
            }
            for t in trials
        ],
    }
    (out / "results.json").write_text(json.dumps(document, indent=2) + "\n")


def html_rows(rows: list[list[str]]) -> str:
    """The table's rows as HTML (the header in <th>), the winner's (numbered with a `*`) of class "winner"."""
    return "".join(
        "<tr"
        + (' class="winner"' if r[0].endswith("*") else "")
        + ">"
        + "".join(f"<{'th' if i == 0 else 'td'}>{html.escape(c)}</{'th' if i == 0 else 'td'}>" for c in r)
        + "</tr>\n"
        for i, r in enumerate(rows)
    )


STYLE = """<style>
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; font-size: 13px; } td, th { border: 1px solid #ccc; padding: 3px 6px; }
tr.winner td { font-weight: bold; background: #fff6d5; } .warning { color: #a35200; }
</style>"""


# -- the page ----------------------------------------------------------------------------------------------------

_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
_W, _H, _LEFT, _RIGHT, _TOP, _BOTTOM = 760, 440, 64, 150, 20, 48


def ticks(top: float, count: int = 5) -> list[float]:
    if top <= 0:
        return [0.0]
    raw = top / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(s * magnitude for s in (1, 2, 2.5, 5, 10, 20) if s * magnitude >= raw)
    return [i * step for i in range(int(top / step) + 1)]


def svg(trials: Sequence[Trial], winner: Trial | None, bound_ms: float) -> str:
    """Throughput (x) against p99 (y): one line per setting through its concurrency levels, its open-loop run a
    hollow square, the bound a dashed red line; points above 3x the bound are drawn at the top edge."""
    points = [m for t in trials for m in [*t.levels, *([t.open_loop] if t.open_loop else [])]]
    x_top = max([m.rate for m in points] + [1.0]) * 1.08
    y_top = min(max([m.p99_ms for m in points] + [bound_ms]), 3 * bound_ms) * 1.1
    plot_w, plot_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def x(rate: float) -> float:
        return _LEFT + plot_w * rate / x_top

    def y(ms: float) -> float:
        return _TOP + plot_h * (1 - min(ms, y_top) / y_top)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" viewBox="0 0 {_W} {_H}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect x="{_LEFT}" y="{_TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>',
    ]
    for tick in ticks(x_top):
        parts.append(f'<text x="{x(tick):.1f}" y="{_H - _BOTTOM + 14}" text-anchor="middle">{rate_cell(tick)}</text>')
    for tick in ticks(y_top):
        parts.append(f'<text x="{_LEFT - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{_ms(tick)}</text>')
        parts.append(f'<line x1="{_LEFT}" x2="{_LEFT + plot_w}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#eee"/>')
    parts += [
        f'<text x="{_LEFT + plot_w / 2}" y="{_H - 12}" text-anchor="middle">requests/s</text>',
        f'<text transform="translate(16 {_TOP + plot_h / 2}) rotate(-90)" text-anchor="middle">p99 latency (ms)</text>',
        f'<line class="bound" x1="{_LEFT}" x2="{_LEFT + plot_w}" y1="{y(bound_ms):.1f}" y2="{y(bound_ms):.1f}" '
        'stroke="#d62728" stroke-dasharray="6 4" stroke-width="1.5"/>',
        f'<text x="{_LEFT + plot_w - 4}" y="{y(bound_ms) - 5:.1f}" text-anchor="end" fill="#d62728">'
        f"p99 bound {_ms(bound_ms)} ms</text>",
    ]
    for index, trial in enumerate(trials):
        colour = _COLOURS[index % len(_COLOURS)]
        won = trial is winner
        levels = sorted(trial.levels, key=lambda m: m.concurrency or 0)
        if levels:
            path = " ".join(f"{x(m.rate):.1f},{y(m.p99_ms):.1f}" for m in levels)
            parts.append(
                f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="{3.5 if won else 1.5}"/>'
            )
            for m in levels:
                parts.append(
                    f'<circle cx="{x(m.rate):.1f}" cy="{y(m.p99_ms):.1f}" r="{4 if won else 2.5}" fill="{colour}">'
                    f"<title>#{trial.number} c={m.concurrency}: {rate_cell(m.rate)} req/s, p99 {_ms(m.p99_ms)} ms"
                    "</title></circle>"
                )
        if trial.open_loop is not None:
            m = trial.open_loop
            parts.append(
                f'<rect x="{x(m.rate) - 4:.1f}" y="{y(m.p99_ms) - 4:.1f}" width="8" height="8" fill="white" '
                f'stroke="{colour}" stroke-width="1.5"><title>#{trial.number} open loop at '
                f"{rate_cell(m.offered_rate or 0)} req/s: p99 {_ms(m.p99_ms)} ms</title></rect>"
            )
        best = trial.best
        if won and best is not None:
            parts.append(
                f'<g class="winner"><circle cx="{x(best.rate):.1f}" cy="{y(best.p99_ms):.1f}" r="9" fill="none" '
                f'stroke="black" stroke-width="2"/><text x="{x(best.rate) + 11:.1f}" y="{y(best.p99_ms) - 10:.1f}" '
                f'font-weight="bold">winner #{trial.number}</text></g>'
            )
        legend_y = _TOP + 14 + 16 * index
        weight = ' font-weight="bold"' if won else ""
        parts.append(
            f'<rect x="{_W - _RIGHT + 12}" y="{legend_y - 9}" width="10" height="10" fill="{colour}"/>'
            f'<text x="{_W - _RIGHT + 26}" y="{legend_y}"{weight}>#{trial.number}{" (winner)" if won else ""}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def render_html(context: Context, trials: Sequence[Trial], winner: Trial | None) -> str:
    cells = html_rows(table_rows(trials, winner))
    if winner is not None:
        verdict = (
            f"<p><b>Winner: #{winner.number}</b> ({html.escape(winner.description)}): "
            f"{rate_cell(winner.score)} requests/s with p99 under {_ms(context.bound_ms)} ms. Its Environment:</p>"
            f"<pre>{html.escape(json.dumps(winner.environment, indent=2, sort_keys=True))}</pre>"
        )
    else:
        verdict = f"<p><b>No setting held p99 under {_ms(context.bound_ms)} ms.</b></p>"
    for note in [*context.notes, *([context.recheck] if context.recheck else [])]:
        verdict += f"<p>{html.escape(note[:1].upper() + note[1:])}.</p>"
    ceiling = context.ceiling
    generator = f"<p>Load generator: {html.escape(context.generator)}"
    if ceiling is not None:
        generator += (
            f"; alone against a bare nginx (one worker) at c={ceiling.concurrency} it drove {rate_cell(ceiling.rate)} "
            f"requests/s using {ceiling.generator_cpu:.2f} cores"
        )
    generator += ". Open loop: Python, Poisson arrivals (seeded), at a fraction of each setting's best rate.</p>"
    warnings = "".join(f'<p class="warning">{html.escape(w)}</p>' for w in context.warnings)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>sagemaker-tfs tune: {html.escape(context.model)}</title>
{STYLE}</head><body>
<h1>sagemaker-tfs tune endpoint</h1>
<p>Model {html.escape(context.model)}, payload {html.escape(context.payload)}; measured on this machine:
{context.cores} cores, {context.memory_gb:.1f} GB; p99 bound {_ms(context.bound_ms)} ms
({html.escape(context.bound_origin)}); {len(trials)} settings in {context.elapsed_s:.0f} s of a
{context.budget_s:.0f} s budget; seed {context.seed}.</p>
{verdict}
{warnings}
{generator}
<h2>Throughput against p99</h2>
<p>Each line: one setting at increasing concurrency (closed loop); a hollow square: its open-loop run.</p>
{svg(trials, winner, context.bound_ms)}
<h2>Settings tried</h2>
<p>req/s@bound: the most requests/s whose p99 stayed under the bound; the latencies, CPU (cores) and resident
memory are those of that run.</p>
<table>
{cells}</table>
</body></html>
"""


def write_report(out: Path, context: Context, trials: Sequence[Trial], winner: Trial | None) -> Path:
    page = out / "report.html"
    page.write_text(render_html(context, trials, winner))
    (out / "table.txt").write_text(render_table(trials, winner) + "\n")
    write_results(out, context, trials, winner)
    return page
