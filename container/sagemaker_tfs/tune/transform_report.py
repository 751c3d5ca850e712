"""What `tune transform` leaves: the table (printed and table.txt), the winner as a CreateTransformJob request
(request.json, the JSON `transform --print-request` prints), its Environment (environment.json and KEY=VALUE lines
in environment.env), every trial (results.json), and report.html: records/s per setting as bars, the winner
marked. The table's layout, the HTML table, the page's style and the axis ticks are report.py's, shared with
`tune endpoint`; what differs is what a row holds (a job's records/s, not a latency curve)."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .report import SHOWN_GROUPS, STYLE, html_rows, rate_cell, text_table, ticks, usage_cell, write_environment
from .transform_job import JobTrial


@dataclass
class TransformContext:
    """What the page says besides the trials."""

    model: str
    data: str
    sample: str  # e.g. "the first 200 records (1 object, 1.2 KB)"
    machine: str  # cores, memory, GPUs
    budget_s: float
    elapsed_s: float
    seed: int
    estimate: str
    request: dict[str, Any]
    notes: list[str] = field(default_factory=list)  # what the tune decided, the recheck's outcome included
    warnings: list[str] = field(default_factory=list)


def table_rows(trials: Sequence[JobTrial], winner: JobTrial | None) -> list[list[str]]:
    header = ["#", "setting", "records/s", "records", "requests", "runs", "job s", "start s", "runner CPU"]
    header += [f"{g} CPU/RSS" for g in SHOWN_GROUPS]
    rows = [header]
    for trial in trials:
        row = [f"{trial.number}{'*' if trial is winner else ''}", trial.description]
        m = trial.measured
        if trial.error or m is None:
            rows.append([*row, *("-" for _ in header[2:]), trial.error or ""])
            continue
        rows.append(
            [
                *row,
                rate_cell(m.rate),
                f"{m.records:,}",
                f"{m.requests:,}",
                str(m.runs),
                f"{m.seconds:.3f}",
                f"{trial.start_seconds:.1f}" if trial.start_seconds else "-",
                f"{m.runner_cores:.2f}c",
                *(usage_cell(m.groups, g) for g in SHOWN_GROUPS),
            ]
        )
    return rows


def render_table(trials: Sequence[JobTrial], winner: JobTrial | None) -> str:
    return text_table(table_rows(trials, winner))


_W, _LEFT, _RIGHT, _TOP, _BAR, _BOTTOM = 760, 64, 40, 16, 22, 40


def svg(trials: Sequence[JobTrial], winner: JobTrial | None) -> str:
    """One bar per setting, its records/s; the winner's dark and labelled, a failed setting's a note."""
    top = max([t.score for t in trials] + [1.0]) * 1.08
    plot_w = _W - _LEFT - _RIGHT
    height = _TOP + _BAR * len(trials) + _BOTTOM
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{height}" viewBox="0 0 {_W} {height}" '
        'font-family="sans-serif" font-size="11">'
    ]
    for tick in ticks(top):
        x = _LEFT + plot_w * tick / top
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{_TOP}" y2="{height - _BOTTOM}" stroke="#eee"/>')
        parts.append(f'<text x="{x:.1f}" y="{height - _BOTTOM + 14}" text-anchor="middle">{rate_cell(tick)}</text>')
    parts.append(f'<text x="{_LEFT + plot_w / 2}" y="{height - 8}" text-anchor="middle">records/s</text>')
    for index, trial in enumerate(trials):
        y = _TOP + _BAR * index
        won = trial is winner
        parts.append(f'<text x="{_LEFT - 6}" y="{y + 15}" text-anchor="end">#{trial.number}</text>')
        if trial.error:
            parts.append(f'<text x="{_LEFT + 4}" y="{y + 15}" fill="#a35200">failed: {html.escape(trial.error)}</text>')
            continue
        width = plot_w * trial.score / top
        bar = (
            f'<rect x="{_LEFT}" y="{y + 3}" width="{width:.1f}" height="{_BAR - 6}" '
            f'fill="{"#1f77b4" if won else "#9ecae1"}"><title>#{trial.number} ({html.escape(trial.description)}): '
            f"{rate_cell(trial.score)} records/s</title></rect>"
        )
        label = f"{rate_cell(trial.score)} records/s" + (f" winner #{trial.number}" if won else "")
        weight = ' font-weight="bold"' if won else ""
        text = f'<text x="{_LEFT + width + 4:.1f}" y="{y + 15}"{weight}>{label}</text>'
        parts.append(f'<g class="winner">{bar}{text}</g>' if won else bar + text)
    parts.append("</svg>")
    return "\n".join(parts)


def render_html(context: TransformContext, trials: Sequence[JobTrial], winner: JobTrial) -> str:
    notes = "".join(f"<p>{html.escape(n[:1].upper() + n[1:])}.</p>" for n in context.notes)
    warnings = "".join(f'<p class="warning">{html.escape(w)}</p>' for w in context.warnings)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>sagemaker-tfs tune transform: {html.escape(context.model)}</title>
{STYLE}</head><body>
<h1>sagemaker-tfs tune transform</h1>
<p>Model {html.escape(context.model)}, input {html.escape(context.data)}; sample: {html.escape(context.sample)};
measured on this machine: {html.escape(context.machine)}; {len(trials)} settings in {context.elapsed_s:.0f} s of a
{context.budget_s:.0f} s budget; seed {context.seed}.</p>
<p><b>Winner: #{winner.number}</b> ({html.escape(winner.description)}): {rate_cell(winner.score)} records/s.
Its CreateTransformJob request:</p>
<pre>{html.escape(json.dumps(context.request, indent=2))}</pre>
<p>{html.escape(context.estimate)}</p>
{notes}
{warnings}
<h2>Records/s per setting</h2>
<p>Each bar: the setting's job on the sample, its stack already up and warmed up.</p>
{svg(trials, winner)}
<h2>Settings tried</h2>
<p>One run's records, requests and time (the job runs again until a second has passed: runs); the stack's start
and warm-up (- when an earlier setting's stack served); the runner's own CPU (it reads, packs and sends the records
on the same machine); CPU (cores busy) and resident memory of the stack's process groups over the runs.</p>
<table>
{html_rows(table_rows(trials, winner))}</table>
</body></html>
"""


def _trial_dict(trial: JobTrial) -> dict[str, Any]:
    return {
        "number": trial.number,
        "setting": trial.description,
        "environment": trial.environment,
        "job": trial.job,
        "records_per_s": trial.score,
        "measured": None if trial.measured is None else asdict(trial.measured),
        "start_seconds": trial.start_seconds,
        "seconds": trial.seconds,
        "error": trial.error,
    }


def write_outputs(out: Path, context: TransformContext, trials: Sequence[JobTrial], winner: JobTrial) -> Path:
    """Every file; the page's path."""
    (out / "request.json").write_text(json.dumps(context.request, indent=2, ensure_ascii=False) + "\n")
    write_environment(out, context.request.get("Environment", {}))
    (out / "table.txt").write_text(render_table(trials, winner) + "\n")
    document = {"context": context.__dict__, "winner": winner.number, "trials": [_trial_dict(t) for t in trials]}
    (out / "results.json").write_text(json.dumps(document, indent=2) + "\n")
    page = out / "report.html"
    page.write_text(render_html(context, trials, winner))
    return page
