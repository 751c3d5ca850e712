"""`tune transform`'s parts without a stack: the sample, the job's dimensions, the estimate, the Environment."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from sagemaker_tfs.shared.storage import Storage
from sagemaker_tfs.tune.settings_space import Candidate, default_candidate, dimensions
from sagemaker_tfs.tune.transform_command import MAX_ENVIRONMENT, _environment, estimate
from sagemaker_tfs.tune.transform_job import JobRun, JobTrial, job_dimensions, job_fields
from sagemaker_tfs.tune.transform_report import TransformContext, render_html, render_table
from sagemaker_tfs.tune.transform_sample import Sample, SampleError, take
from sagemaker_tfs.tune.transform_tuner import TransformTuner, run_tuner
from sagemaker_tfs.tune.usage import GROUPS, GroupUsage


@pytest.fixture
def lines(tmp_path: Path) -> Path:
    folder = tmp_path / "input"
    folder.mkdir()
    (folder / "a.csv").write_text("1\n2\n3\n")
    (folder / "b.csv").write_text("4\r\n5\n6")
    (folder / "c.csv").write_text("7\n")
    return folder


def test_a_sample_of_records_is_a_prefix_across_objects_framed_as_read(lines: Path, tmp_path: Path):
    sample = take(Storage(), str(lines), "S3Prefix", "Line", None, 5, tmp_path / "s")
    assert (sample.records, sample.objects, sample.input_objects) == (5, 2, 3)
    assert (sample.folder / "a.csv").read_text() == "1\n2\n3\n"
    assert (sample.folder / "b.csv").read_text() == "4\n5\n"  # (a record is a line without its \r, as the job sends)
    assert not (sample.folder / "c.csv").exists()
    assert (sample.warm_up / "a.csv").read_text() == "1\n2\n3\n"
    assert sample.input_bytes == 6 + 6 + 2 and sample.stored_bytes == 6 + 4


def test_a_sample_of_objects_and_a_gzipped_one(lines: Path, tmp_path: Path):
    sample = take(Storage(), str(lines), "S3Prefix", "None", None, 2, tmp_path / "s")
    assert sorted(p.name for p in sample.folder.iterdir()) == ["a.csv", "b.csv"] and sample.records == 2
    zipped = tmp_path / "zipped"
    zipped.mkdir()
    (zipped / "a.csv.gz").write_bytes(gzip.compress(b"1\n2\n3\n"))
    sample = take(Storage(), str(zipped), "S3Prefix", "Line", "Gzip", 2, tmp_path / "z")
    assert gzip.decompress((sample.folder / "a.csv.gz").read_bytes()) == b"1\n2\n"


def test_a_sample_that_cannot_be_read_names_the_object(tmp_path: Path):
    (tmp_path / "bad.tfrecord").write_bytes(b"not a frame at all")
    with pytest.raises(SampleError, match="bad.tfrecord"):
        take(Storage(), str(tmp_path / "bad.tfrecord"), "S3Prefix", "TFRecord", None, 10, tmp_path / "s")
    with pytest.raises(SampleError, match="No S3 objects found"):
        take(Storage(), str(tmp_path / "nothing"), "S3Prefix", "Line", None, 10, tmp_path / "s")


def test_the_job_dimensions_follow_the_split_type_and_hold_what_is_given():
    assert [d.field for d in job_dimensions(2, "None", {})] == ["max_concurrent_transforms"]
    space = job_dimensions(2, "Line", {"max_payload": 1})
    concurrency, strategy, payload = space
    assert concurrency.default == 1 and max(concurrency.values) <= 100 and concurrency.values[0] == 1
    assert strategy.values == ("MultiRecord", "SingleRecord") and strategy.default == "MultiRecord"
    assert payload.values == (1,) and payload.default == 1
    full = dimensions(2) + space
    assert job_fields(default_candidate(full), full) == {
        "max_concurrent_transforms": 1,
        "strategy": "MultiRecord",
        "max_payload": 1,
    }


def test_the_estimate_scales_the_sample_to_the_input_and_names_the_machine(tmp_path: Path):
    sample = Sample(tmp_path, tmp_path, 1, 100, 1_000, 10, 100_000)
    text = estimate(sample, 50.0, 1, "2 cores, 4.0 GB memory, no GPU")
    assert "about 10,000 records" in text and "about 3 min 20 s per instance" in text and "2 cores" in text
    assert "on 4 instances" in estimate(sample, 50.0, 4, "x")
    assert estimate(Sample(tmp_path, tmp_path, 1, 100, 1_000, 10, None), 50.0, 1, "x").startswith("estimate: none")


def _trial(number: int, candidate: Candidate, rate: float, error: str | None = None) -> JobTrial:
    space = dimensions(2)
    groups = GroupUsage(dict.fromkeys(GROUPS, 0.1), dict.fromkeys(GROUPS, 10.0))
    measured = None if error else JobRun(rate, 2, 100, 1, 0.5, groups, 0.3)
    return JobTrial(
        number, candidate, candidate.describe(space), candidate.environment(space), {}, measured, error=error
    )


def test_the_environment_stays_within_create_transform_jobs_limit():
    space = dimensions(2)
    trial = _trial(1, default_candidate(space).replace(gunicorn_workers=4), 1.0)
    defaults = default_candidate(space).environment(space)
    assert _environment({"A": "1"}, trial, defaults) == {"A": "1", **trial.environment}
    many = {f"USER_{i}": "x" for i in range(12)}
    assert _environment(many, trial, defaults) == {**many, "SAGEMAKER_GUNICORN_WORKERS": "4"}
    assert len(_environment(many, trial, defaults)) <= MAX_ENVIRONMENT


def test_the_table_and_the_page_mark_the_winner_and_the_failures(tmp_path: Path):
    space = dimensions(2)
    trials = [
        _trial(1, default_candidate(space), 100.0),
        _trial(2, default_candidate(space).replace(tfs_instance_count=2), 150.0),
        _trial(3, default_candidate(space).replace(tfs_enable_batching=True), 0.0, "ClientError: 400"),
    ]
    table = render_table(trials, trials[1]).splitlines()
    assert table[0].split()[:3] == ["#", "setting", "records/s"] and table[2].startswith("2* ")
    assert table[3].endswith("ClientError: 400") and table[1].split()[2:6] == ["100", "100", "1", "2"]
    context = TransformContext("m", "d", "s", "2 cores", 60, 30, 0, "estimate: x", {"Environment": {}}, ["a note"])
    page = render_html(context, trials, trials[1])
    assert page.count('class="winner"') == 2  # the bar and the table's row
    assert "winner #2" in page and "failed: ClientError: 400" in page and "<svg" in page and "A note." in page


class FakeRunner:
    """JobRunner's part the tuner uses, with rates from a function of the setting: no stack, no job."""

    def __init__(self, rate):
        self.rate, self.started, self.jobs, self.closed = rate, [], 0, False

    def stack(self, environment, job, warm_up, timeout, keep=None) -> bool:
        key = tuple(sorted(environment.items()))
        if key in self.started:
            return False
        self.started.append(key)
        return True

    def job(self, environment, job, data, on_progress=None, min_seconds=0.0) -> JobRun:
        self.jobs += 1
        groups = GroupUsage(dict.fromkeys(GROUPS, 0.0), dict.fromkeys(GROUPS, 1.0))
        return JobRun(self.rate(environment, job), 1, 10, 1, 0.001, groups, 0.1)

    def close(self) -> None:
        self.closed = True


def _tuner(tmp_path: Path, rate, budget: float = 30.0) -> TransformTuner:
    sample = Sample(tmp_path, tmp_path, 1, 10, 100, 1, 100)
    container = dimensions(2)
    space = container + job_dimensions(2, "Line", {})
    return TransformTuner(FakeRunner(rate), sample, space, container, budget, seed=1)  # type: ignore[arg-type]


def test_the_tuner_climbs_skips_what_validation_refuses_and_rechecks_the_winner(tmp_path: Path):
    tuner = _tuner(tmp_path, lambda env, job: 100.0 * job["max_concurrent_transforms"] / (1 + (job["max_payload"] > 6)))
    winner = run_tuner(tuner)
    assert tuner.runner.closed and tuner.trials[0].description == "defaults"
    assert winner.job["max_concurrent_transforms"] == 64 and winner.score == 6400  # 64 x 1 or 2 MB: within 100 MB
    assert tuner.recheck and "median records/s: #" in tuner.recheck and "the defaults stay" not in tuner.recheck
    assert any("skipped" in note for note in tuner.notes)
    assert all(t.job["max_concurrent_transforms"] * t.job["max_payload"] <= 100 for t in tuner.trials)
    settings = [t.description for t in tuner.trials]
    assert len(settings) == len(set(settings))  # each setting measured once


def test_the_tuner_keeps_the_defaults_within_noise_and_repeats_with_its_seed(tmp_path: Path):
    flat = run_tuner(_tuner(tmp_path, lambda env, job: 100.0 + job["max_concurrent_transforms"] / 100))
    assert flat.number == 1
    first, second = (_tuner(tmp_path, lambda env, job: float(len(str(sorted(env.items()))))) for _ in range(2))
    run_tuner(first), run_tuner(second)
    assert [t.description for t in first.trials] == [t.description for t in second.trials]
