"""`tune`'s parts without a stack: the settings space, the seeded search, the Poisson schedule, the report."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from xml.etree import ElementTree

import pytest
from sagemaker_tfs.config import VARIABLES
from sagemaker_tfs.shared.free_ports import free_port
from sagemaker_tfs.tune.endpoint import Tuner, parse_duration, recheck_verdict
from sagemaker_tfs.tune.load import (
    ClosedLoop,
    LoadError,
    Measurement,
    Payloads,
    bare_nginx,
    h2load_problem,
    open_loop,
    percentile,
    poisson_schedule,
)
from sagemaker_tfs.tune.report import Context, render_html, render_table, write_environment
from sagemaker_tfs.tune.search import HillClimb
from sagemaker_tfs.tune.settings_space import BATCH_PARAMETERS, Candidate, Dimension, default_candidate, dimensions
from sagemaker_tfs.tune.trial import Trial, leader
from sagemaker_tfs.tune.usage import GROUPS, GroupUsage

NAMES = {variable.name for variable in VARIABLES.values()}


def test_poisson_schedule_repeats_with_its_seed():
    first = poisson_schedule(500, 4, seed=7)
    assert first == poisson_schedule(500, 4, seed=7)
    assert first != poisson_schedule(500, 4, seed=8)
    assert first == sorted(first) and 0 < first[0] and first[-1] < 4
    assert 0.9 * 2000 < len(first) < 1.1 * 2000  # 500/s over 4 s, within a few standard deviations (45)


def test_poisson_schedule_gaps_look_exponential():
    times = poisson_schedule(1000, 20, seed=1)
    gaps = sorted(b - a for a, b in zip([0.0, *times], times, strict=False))
    assert percentile(gaps, 0.5) == pytest.approx(0.000693, rel=0.1)  # the median of Exp(1000): ln 2 / 1000


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 0.5), percentile(values, 0.99), percentile(values, 1.0)) == (50.0, 99.0, 100.0)
    assert percentile([], 0.99) == 0.0


def test_the_space_follows_the_core_count_and_renders_real_variables():
    space = dimensions(8)
    default = default_candidate(space)
    workers = next(d for d in space if d.field == "gunicorn_workers")
    assert workers.values == (1, 4, 8, 16) and workers.default == 8
    env = default.environment(space)
    assert set(env) <= NAMES and all(isinstance(v, str) for v in env.values())
    assert env["SAGEMAKER_TFS_ENABLE_BATCHING"] == "false" and "SAGEMAKER_TFS_MAX_BATCH_SIZE" not in env
    assert env["OMP_NUM_THREADS"] == "1" and default.describe(space) == "defaults"
    batching = default.replace(tfs_enable_batching=True, tfs_max_batch_size=32)
    assert batching.environment(space)["SAGEMAKER_TFS_MAX_BATCH_SIZE"] == "32"
    assert batching.describe(space).startswith("batching=on max batch=32")


def _objective(candidate: Candidate) -> float:
    """A made-up landscape: more workers help up to 4, batching with size 16 helps, threads hurt."""
    workers = int(candidate["gunicorn_workers"])
    score = 100.0 - 10 * abs(workers - 4)
    if candidate["tfs_enable_batching"]:
        score += 30 - abs(int(candidate["tfs_max_batch_size"]) - 16) / 2
    return score - 5 * (int(candidate["gunicorn_threads"]) - 1)


def _climb(seed: int, steps: int) -> list[Candidate]:
    search = HillClimb(dimensions(8), seed)
    asked = []
    for _ in range(steps):
        candidate = search.ask()
        if candidate is None:
            break
        asked.append(candidate)
        search.tell(candidate, _objective(candidate))
    return asked


def test_the_search_starts_at_the_defaults_and_repeats_with_its_seed():
    asked = _climb(seed=3, steps=30)
    assert asked[0] == default_candidate(dimensions(8))
    assert asked == _climb(seed=3, steps=30)
    assert asked != _climb(seed=4, steps=30)
    assert len(set(asked)) == len(asked)  # nothing measured twice


def test_the_search_climbs_to_the_optimum_without_a_grid():
    space = dimensions(8)
    asked = _climb(seed=0, steps=40)
    best = max(asked, key=_objective)
    assert best["gunicorn_workers"] == 4 and best["tfs_enable_batching"] is True
    assert best["tfs_max_batch_size"] == 16 and best["gunicorn_threads"] == 1
    for candidate in asked:  # batching off: its parameters stay at their defaults (the same stack)
        if not candidate["tfs_enable_batching"]:
            assert all(candidate[d.field] == d.default for d in space if d.field in BATCH_PARAMETERS)


def test_the_search_ends_when_the_space_is_tried():
    space = (Dimension("gunicorn_workers", (1, 2), 2, 1, "workers"), *dimensions(2)[1:])
    small = tuple(
        d if d.field == "gunicorn_workers" else Dimension(d.field, (d.default,), d.default, 2, d.label) for d in space
    )
    small = tuple(
        Dimension(d.field, (False, True), False, 1, d.label) if d.field == "tfs_enable_batching" else d for d in small
    )
    search = HillClimb(small, seed=1)
    asked = []
    while (candidate := search.ask()) is not None:
        asked.append(candidate)
        search.tell(candidate, 1.0)
    assert len(asked) == 4  # 2 worker counts x batching on/off


def test_durations():
    assert [parse_duration(t) for t in ("90", "90s", "10m", "1h", "1m30s", "2.5m")] == [90, 90, 600, 3600, 90, 150]
    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration("soon")


def test_payloads_that_cannot_be_read(tmp_path: Path):
    with pytest.raises(LoadError, match="does not exist"):
        Payloads.read(tmp_path / "missing.json", "application/json", None)
    with pytest.raises(LoadError, match="has no files"):
        Payloads.read(tmp_path, "application/json", None)
    (tmp_path / "b.json").write_text("[2]")
    (tmp_path / "a.json").write_text("[1]")
    payloads = Payloads.read(tmp_path, "application/json", "text/csv")
    assert payloads.bodies == (b"[1]", b"[2]")
    assert payloads.requests("h:1", "/invocations")[0].endswith(b"Accept: text/csv\r\nContent-Length: 3\r\n\r\n[1]")


def _measured(concurrency: int, rate: float, p99: float) -> Measurement:
    usage = GroupUsage(dict.fromkeys(GROUPS, 0.5), dict.fromkeys(GROUPS, 100.0))
    return Measurement("wrk", 1.0, int(rate), 0, p99 / 2, p99 / 1.5, p99, 0.3, concurrency=concurrency, groups=usage)


def _trial(number: int, rate: float, opened_p99: float | None, behind_ms: float = 0, bound: float = 3) -> Trial:
    """A setting measured at one level (p99 1 ms) and, unless opened_p99 is None, in the open loop."""
    opened = None
    if opened_p99 is not None:
        opened = Measurement("python", 1.0, int(rate), 0, 1, 1, opened_p99, 0.3, offered_rate=rate, behind_ms=behind_ms)
    return Trial(number, default_candidate(dimensions(2)), "t", {}, [_measured(1, rate, 1)], opened, bound)


def test_an_open_loop_that_held_ranks_first_and_one_not_counted_is_not_taken_for_one_that_held():
    default, held, missed, not_counted = _trial(1, 400, 2), _trial(2, 500, 2), _trial(3, 900, 8), _trial(4, 700, 8, 2.5)
    assert (held.open_loop_held, missed.open_loop_held, not_counted.open_loop_held) == (True, False, False)
    assert leader([default, not_counted, missed, held], 0.03) is held
    assert leader([default, not_counted, missed], 0.03) is default  # the unknown is not preferred to the faster
    assert leader([default, not_counted], 0.03) is default
    assert leader([_trial(1, 400, 8), not_counted, _trial(3, 410, 8)], 0.03).number == 4  # (not 3: within 3%)


def test_when_the_defaults_miss_the_bound_in_the_open_loop_it_sorts_nothing():
    # image_classifier's run on 2 cores: only a batching setting, slower, held a 55 ms bound in the open loop
    defaults, batching, workers = (
        _trial(n, rate, p99, bound=55) for n, rate, p99 in ((1, 713, 180), (2, 684, 40), (3, 982, 180))
    )
    assert batching.open_loop_held and not defaults.open_loop_held and not workers.open_loop_held
    assert leader([defaults, batching, workers], 0.03) is workers
    assert leader([defaults, batching], 0.03) is defaults  # by rate alone
    assert leader([_trial(1, 713, None, bound=55), batching, workers], 0.03) is workers  # (not measured: not held)
    held = _trial(1, 713, 40, bound=55)  # the defaults held: the open loop counts, and they are the fastest that held
    assert leader([held, batching, workers], 0.03) is held


def test_the_report_draws_the_bound_and_marks_the_winner(tmp_path: Path):
    space = dimensions(2)
    default = default_candidate(space)
    other = default.replace(gunicorn_workers=4)
    trials = [
        Trial(
            1, default, "defaults", default.environment(space), [_measured(1, 500, 1), _measured(2, 800, 4)], None, 3
        ),
        Trial(2, other, "workers=4", other.environment(space), [_measured(1, 600, 1), _measured(2, 900, 2)], None, 3),
    ]
    assert trials[0].score == 500 and trials[1].score == 900
    table = render_table(trials, trials[1]).splitlines()
    assert len(table) == 3 and table[2].startswith("2*") and "900" in table[2]
    context = Context("m", "p", 2, 4.0, "wrk", 3.0, "--p99-ms", 60, 50, 0, None, ["shared cores"])
    page = render_html(context, trials, trials[1])
    assert "<svg" in page and 'class="bound"' in page and "winner #2" in page and "shared cores" in page
    drawing = ElementTree.fromstring(page[page.index("<svg") : page.index("</svg>") + 6])  # well-formed SVG
    assert len(drawing.findall("{http://www.w3.org/2000/svg}polyline")) == 2
    write_environment(tmp_path, trials[1].environment)
    written = json.loads((tmp_path / "environment.json").read_text())
    lines = (tmp_path / "environment.env").read_text().splitlines()
    assert dict(line.split("=", 1) for line in lines) == written and written["SAGEMAKER_GUNICORN_WORKERS"] == "4"


@pytest.mark.parametrize("generator", ["python", "wrk", "h2load"])
def test_the_generators_against_a_bare_nginx(tmp_path: Path, generator: str):
    if generator != "python" and not shutil.which(generator):
        pytest.skip(f"{generator} is not installed")
    if generator == "h2load" and (problem := h2load_problem()) is not None:
        pytest.skip(problem)
    payload = tmp_path / "body.json"
    payload.write_text('{"instances": [1.0]}')
    payloads = Payloads.read(payload, "application/json", None)
    port = free_port()
    with bare_nginx(port):
        closed = ClosedLoop(payloads, tmp_path, generator).run("127.0.0.1", port, 4, 1.0)
        opened = open_loop("127.0.0.1", port, payloads, 200, 1.0, seed=5)
    assert closed.generator == generator and closed.concurrency == 4
    assert closed.requests > 0 and closed.errors == 0 and 0 < closed.p50_ms <= closed.p90_ms <= closed.p99_ms
    assert closed.generator_cpu > 0
    assert opened.errors == 0 and opened.requests == len(poisson_schedule(200, 1.0, seed=5))
    assert opened.offered_rate == 200 and opened.p99_ms > 0


def test_an_h2load_that_may_not_end_a_timed_run_is_refused(tmp_path: Path):
    assert h2load_problem("h2load nghttp2/1.69.0") is None and h2load_problem("h2load nghttp2/2.1.0") is None
    assert h2load_problem("h2load nghttp2/1.52.0") == (
        "h2load 1.52 may never end a timed run (fixed in nghttp2 1.69): use wrk or python, or a newer h2load"
    )
    assert (
        h2load_problem("h2load: unknown") == "Unable to read h2load's version from 'h2load: unknown': use wrk or python"
    )
    if shutil.which("h2load") and (problem := h2load_problem()) is not None:  # Debian 12's 1.52: named, refused
        payload = tmp_path / "body.json"
        payload.write_text("{}")
        with pytest.raises(LoadError) as refused:
            ClosedLoop(Payloads.read(payload, "application/json", None), tmp_path, "h2load")
        assert str(refused.value) == problem


def test_a_frozen_dimension_stays_at_its_default():
    search = HillClimb(dimensions(8), seed=2)
    default = search.ask()
    assert default is not None
    search.freeze({"gunicorn_workers", "gunicorn_threads"})
    search.tell(default, 10.0)
    for _ in range(25):
        candidate = search.ask()
        assert candidate is not None
        assert candidate["gunicorn_workers"] == 8 and candidate["gunicorn_threads"] == 1
        search.tell(candidate, _objective(candidate))


def test_a_setting_s_load_leaves_a_recheck_its_time(tmp_path: Path):
    payload = tmp_path / "body.json"
    payload.write_text("{}")
    args = argparse.Namespace(budget=100.0, seed=0, step_seconds=2.0, generator="python", p99_ms=None)
    tuner = Tuner(tmp_path, Payloads.read(payload, "application/json", None), args, tmp_path)
    assert tuner.left() == pytest.approx(tuner.remaining(), abs=0.5)  # the defaults: nothing to recheck yet
    tuner.trials.append(_trial(1, 500, 1))
    tuner.trials[0].start_seconds = 6.0
    assert tuner.recheck_estimate() > 2 * 6.0 + 6 * 2.0  # two starts, three rounds of two steps
    assert tuner.remaining() - tuner.left() == pytest.approx(tuner.recheck_estimate(), abs=0.5)


def test_the_recheck_keeps_a_winner_only_ahead_of_the_defaults_beyond_noise():
    assert recheck_verdict(5, [6300.0, 6298.4, 5000.0], [5532.0, 5600.0, 5400.0], "req/s under the bound", 0) == (
        True,
        "rechecked in 3 alternating rounds, median req/s under the bound: #5 6,298, the defaults 5,532",
    )
    assert recheck_verdict(2, [101.0, 103.0, 99.0], [100.0, 100.0, 100.0], "records/s", 1) == (
        False,
        "rechecked in 3 alternating rounds, median records/s: #2 101.0, the defaults 100.0: not ahead beyond noise, "
        "the defaults stay",
    )
