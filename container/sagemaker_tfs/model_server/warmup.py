"""Model warm-up: TFS's replay of a version's `assets.extra/tf_serving_warmup_requests` as it loads it.

As in TFS (saved_model_warmup_util.cc, saved_model_warmup.cc), after the load and before the version is AVAILABLE,
each record of that TFRecord file (read by TensorFlow's reader) is a PredictionLog whose Predict, Classify, Regress
or MultiInference request runs on the version being loaded, `iterations` times; the first error fails the load,
with TFS's status. Once the reader has ended the loop (end of file or a reader error), the model_warmup_latency and
model_warmup_records_read metrics are recorded; runs of Predict, Classify and Regress count in runtime_latency
under the request's model name, as TFS's do.

Where it differs: the requests call the servable on the loading thread, never through the batch scheduler (TFS's
go through its batching session), and a MultiInference runs a session call per task, as our gRPC one does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from google.protobuf.message import DecodeError
from tensorflow_serving.apis import prediction_log_pb2

from ..shared.error_codes import Code, ServingError, from_tensorflow, invalid_argument
from . import prediction_api
from .metrics import ModelServerMetrics
from .servable import Servable

log = logging.getLogger(__name__)

REQUESTS_FILE = Path("assets.extra") / "tf_serving_warmup_requests"
MAX_RECORDS = 1000  # TFS's WarmupConsts::kMaxNumRecords

# a PredictionLog's log_type -> what runs its request
_REQUESTS = {
    "predict_log": prediction_api.predict,
    "classify_log": prediction_api.classify,
    "regress_log": prediction_api.regress,
    "multi_inference_log": prediction_api.multi_inference,
}
_UNSUPPORTED = ("predict_streamed_log", "session_run_log")


def replay(servable: Servable, export_dir: Path, iterations: int, metrics: ModelServerMetrics | None) -> None:
    """Warm up a loaded version from its export directory's warm-up file, running each record `iterations` times
    (TFS's --num_request_iterations_for_warmup: once when not > 0); raises ServingError with TFS's status."""
    started = time.perf_counter()
    path = export_dir / REQUESTS_FILE
    if not path.exists():
        log.info("No warmup data file found at %s", path)
        return
    # TFS logs the ModelWarmupOptions' DebugString; on one line here (a log line is one line)
    options = f"num_request_iterations {{ value: {iterations} }}" if iterations > 0 else ""
    log.info("Starting to read warmup data for model at %s with model-warmup-options %s", path, options)
    from tensorflow.python.framework import errors
    from tensorflow.python.lib.io import tf_record
    from tensorflow.python.util import deprecation

    try:
        with deprecation.silence():
            records = tf_record.tf_record_iterator(str(path))
    except errors.OpError as exc:  # cannot open it
        raise from_tensorflow(exc) from None
    loop = asyncio.new_event_loop()
    count, status = 0, None
    try:
        while True:
            try:
                record = next(records)
            except StopIteration:
                break
            except errors.OpError as exc:
                status = from_tensorflow(exc)
                break
            entry = prediction_log_pb2.PredictionLog()
            try:
                entry.ParseFromString(record)
            except DecodeError:
                raise invalid_argument(
                    f"Failed to parse warmup record: {record.decode('utf-8', 'replace')} from {path}"
                ) from None
            for _ in range(max(iterations, 1)):
                loop.run_until_complete(_run_record(servable, entry, metrics))
            count += 1
            if count > MAX_RECORDS:
                raise invalid_argument(f"Number of warmup records exceeds the maximum ({MAX_RECORDS}) at {path}")
    finally:
        loop.close()
    elapsed = int((time.perf_counter() - started) * 1e6)
    if metrics is not None:
        metrics.warmup(
            str(export_dir), "OK" if status is None else f"{status.code.name}: {status.message}", elapsed, count
        )
    if status is not None:
        if status.code == Code.DATA_LOSS:
            raise ServingError(
                Code.DATA_LOSS, f"{status.message}. Please verify your warmup data is in TFRecord format."
            )
        raise status
    log.info(
        "Finished reading warmup data for model at %s. Number of warmup records read: %d. Elapsed time "
        "(microseconds): %d.",
        path,
        count,
        elapsed,
    )


async def _run_record(
    servable: Servable, entry: prediction_log_pb2.PredictionLog, metrics: ModelServerMetrics | None
) -> None:
    """One run of a record's request on the servable; its response is dropped."""
    kind = entry.WhichOneof("log_type")
    if kind in _UNSUPPORTED:
        number = entry.DESCRIPTOR.fields_by_name[kind].number  # TFS prints the oneof case
        raise ServingError(Code.UNIMPLEMENTED, f"Unsupported log_type for warmup: {number}")
    call = _REQUESTS.get(kind)
    if call is None:  # no log_type: nothing to run
        return
    request = getattr(entry, kind).request
    # TFS records the runtime of Predict, Classify and Regress under the request's model name, not MultiInference's
    model_name = None if kind == "multi_inference_log" else request.model_spec.name

    async def run(target: Servable, feeds: dict[str, np.ndarray], fetches: Sequence[str], api: str) -> list[np.ndarray]:
        ran = time.perf_counter()
        outputs = target.run(feeds, fetches)
        if metrics is not None and model_name is not None:
            metrics.runtime(model_name, api, ran)
        return outputs

    await call(lambda spec: servable, request, run)
