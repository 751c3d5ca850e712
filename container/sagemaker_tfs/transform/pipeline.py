"""The engine of a job: input objects -> records -> request bodies -> POST /invocations -> ordered outputs.

Threads, and why: per instance, MaxConcurrentTransforms *workers*, each with its own keep-alive connection,
take the next batch from the instance's lazy source (reading, decompressing, splitting, filtering and packing
happen as batches are taken, so reading never runs ahead of the requests), send it, and turn the response into
output bytes (split, join, filter, assemble) in parallel. Every outcome goes to one result queue read by the
calling thread (the *collector*), which alone keeps per-object state: it writes outputs in input order as soon as
they are contiguous, and publishes an object's output only once all its records succeeded. The collector wakes
every 20 ms and takes all that arrived: a consumer blocked on the queue would have to be woken for every
request, which costs more than the request itself on a small machine; no request ever waits for it.

Objects are spread over instances by their position in key order (object i to instance i mod InstanceCount)
[INF: SageMaker spreads "by key"; the outputs are the same for any count]. An object that fails keeps being
processed to the end, so that its description lists every failed record; it gets no output.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ..shared.storage import InputObject, PendingOutput, Storage
from .batch_strategy import PAYLOAD_TOO_LARGE, Batch, Item, TooLarge, pack
from .client import InvocationError, InvocationsClient, InvocationSettings
from .dataprocessing import DataProcessing, RecordError, assemble
from .events import BatchDone, Event, ObjectRead, ObjectSplit, RecordRefused
from .outcomes import Failure, FailureKind, Status
from .records import FramingError, joiner, split

log = logging.getLogger("sagemaker_tfs.transform")

MAX_LOGGED_FAILURES = 5  # per object; the job description has them all
MAX_KEPT_MESSAGES = 10  # distinct messages kept per object in the description
COLLECT_INTERVAL = 0.02  # seconds between two looks at the result queue


def log_object(label: str, message: str) -> None:
    """A message about one object, one line each, as SageMaker's job logs show them."""
    for line in message.split("\n"):
        log.info("[sagemaker logs]: %s: %s", label, line)


def _write_failure(output: str, exc: Exception) -> Failure:
    return Failure(f"Unable to write the output {output}: {exc}", FailureKind.CLIENT)


@dataclass(frozen=True)
class Plan:
    """Everything the engine needs, resolved (job fields, container answer, defaults)."""

    split_type: str
    multi_record: bool
    payload_limit: int  # bytes; 0: none
    concurrency: int  # per instance
    compression: str | None
    assemble_with: str | None
    dataprocessing: DataProcessing
    invocation: InvocationSettings


@dataclass
class ObjectResult:
    input: str
    output: str
    instance: int
    size: int | None = None  # stored size
    status: Status = Status.IN_PROGRESS
    records: int = 0
    failed_records: list[int] = field(default_factory=list)
    requests: int = 0
    retries: int = 0
    bytes_read: int = 0
    bytes_sent: int = 0
    bytes_written: int = 0
    messages: list[str] = field(default_factory=list)
    failure_kind: FailureKind | None = None  # from the first failure


@dataclass
class Stats:
    """Running totals for the progress bar."""

    objects: int
    objects_done: int = 0
    objects_failed: int = 0
    records_done: int = 0
    records_failed: int = 0
    requests: int = 0
    bytes_total: int = 0  # object sizes, decompressed once known
    bytes_done: int = 0  # covered by finished requests


class _State:
    """The collector's bookkeeping for one object."""

    def __init__(self, result: ObjectResult, label: str):
        self.result = result
        self.label = label
        self.pending: dict[int, bytes] = {}
        self.next_seq = 0
        self.received = 0
        self.total: int | None = None  # batches, once the whole object has been split
        self.output: PendingOutput | None = None
        self.logged = 0


class _Source:
    """The batches of one instance, shared by its workers. The lock is held only while the next batch is cut
    (splitting is lazy, so reading never runs ahead of the requests), never during a request."""

    def __init__(self, batches: Iterator[tuple[int, int, Batch]]):
        self._batches = batches
        self._lock = threading.Lock()

    def next(self) -> tuple[int, int, Batch] | None:
        with self._lock:
            return next(self._batches, None)


class Pipeline:
    def __init__(
        self,
        objects: list[InputObject],
        outputs: list[str],
        endpoints: list[str],
        plan: Plan,
        storage: Storage,
        on_progress: Callable[[Stats], None] | None = None,
    ):
        self.objects = objects
        self.plan = plan
        self.storage = storage
        self.endpoints = endpoints  # one per instance
        self.results = [
            ObjectResult(obj.location, out, i % len(endpoints), obj.size)
            for i, (obj, out) in enumerate(zip(objects, outputs, strict=True))
        ]
        self.states = [_State(result, obj.label) for result, obj in zip(self.results, objects, strict=True)]
        self.stats = Stats(len(objects), bytes_total=sum(obj.size or 0 for obj in objects))
        self.on_progress = on_progress
        self.events: queue.SimpleQueue[Event] = queue.SimpleQueue()
        self.stop = threading.Event()

    # ----- threads -----

    def run(self) -> list[ObjectResult]:
        """Process every object; on KeyboardInterrupt, stop, leave no output for unfinished objects, re-raise."""
        threads: list[threading.Thread] = []
        for instance, endpoint in enumerate(self.endpoints):
            mine = [i for i in range(len(self.objects)) if self.results[i].instance == instance]
            source = _Source(self._batches(mine))
            for n in range(self.plan.concurrency):
                client = InvocationsClient(endpoint, self.plan.invocation)
                threads.append(
                    threading.Thread(
                        target=self._work, args=(source, client), daemon=True, name=f"transform-{instance}-{n}"
                    )
                )
        for thread in threads:
            thread.start()
        try:
            self._collect()
        except BaseException:
            self.stop.set()
            for state in self.states:
                if state.result.status is Status.IN_PROGRESS:
                    state.result.status = Status.STOPPED
                    if state.output is not None:
                        state.output.discard()
            raise
        return self.results

    def _batches(self, object_ids: list[int]) -> Iterator[tuple[int, int, Batch]]:
        """(object, sequence number, batch) for the objects of one instance, in order; outcomes that need no
        request (an unreadable object, a record over the limit) go straight to the collector."""
        plan = self.plan
        for obj_id in object_ids:
            obj = self.objects[obj_id]
            seq = stored = 0  # batches given out, bytes read
            counter = [0]  # records split
            failure: Failure | None = None
            try:
                body, stored = self.storage.read_input(obj, plan.compression)
                self.events.put(ObjectRead(obj_id, len(body)))
                for batch in pack(
                    self._items(obj_id, body, counter), plan.multi_record, plan.payload_limit, joiner(plan.split_type)
                ):
                    if isinstance(batch, TooLarge):
                        too_large = Failure(PAYLOAD_TOO_LARGE, FailureKind.CLIENT)
                        self.events.put(RecordRefused(obj_id, batch.index, too_large, batch.size))
                        continue
                    yield obj_id, seq, batch
                    seq += 1
            except (OSError, FramingError) as exc:
                failure = Failure(str(exc), FailureKind.CLIENT)
            except Exception as exc:  # a bug must not leave the collector waiting for this object
                log.exception("unexpected error while reading %s", obj.label)
                failure = Failure(f"Internal error while reading the object: {exc}", FailureKind.CLIENT)
            self.events.put(ObjectSplit(obj_id, seq, counter[0], stored, failure))

    def _items(self, obj_id: int, body: bytes, counter: list[int]) -> Iterator[Item]:
        plan = self.plan
        processing = plan.dataprocessing
        extra = 1 if plan.split_type == "Line" else 0  # the newline ending each line
        for index, record in enumerate(split(body, plan.split_type)):
            counter[0] = index + 1
            size = len(record.framed) + extra
            if not processing.active:
                yield Item(index, record.framed if plan.multi_record else record.data, None, size)
                continue
            try:
                yield Item(index, processing.request_record(record.data), record.data, size)
            except RecordError as exc:
                self.events.put(RecordRefused(obj_id, index, Failure(str(exc), exc.kind), size))

    def _work(self, source: _Source, client: InvocationsClient) -> None:
        try:
            while not self.stop.is_set():
                item = source.next()
                if item is None:
                    return
                obj_id, seq, batch = item
                self.events.put(self._invoke(obj_id, seq, batch, client))
        finally:
            client.close()

    def _invoke(self, obj_id: int, seq: int, batch: Batch, client: InvocationsClient) -> BatchDone:
        try:
            body, retries = client.invoke(batch.body)
        except InvocationError as exc:
            return BatchDone(obj_id, seq, batch, Failure(exc.message, exc.kind), exc.retries)
        except Exception as exc:  # a bug must not leave the collector waiting for this batch
            log.exception("unexpected error while sending a request")
            return BatchDone(obj_id, seq, batch, Failure(f"Internal error: {exc}", FailureKind.ALGORITHM), 0)
        try:
            processing = self.plan.dataprocessing
            outputs = processing.outputs(batch.originals, body) if processing.active else [body]
            output = assemble(outputs, self.plan.assemble_with)
        except RecordError as exc:
            return BatchDone(obj_id, seq, batch, Failure(str(exc), exc.kind), retries)
        return BatchDone(obj_id, seq, batch, output, retries)

    # ----- the collector -----

    def _collect(self) -> None:
        remaining = len(self.objects)
        next_report = 0.0
        while remaining:
            time.sleep(COLLECT_INTERVAL)
            try:
                while True:
                    remaining -= self._handle(self.events.get_nowait())
            except queue.Empty:
                pass
            now = time.monotonic()
            if self.on_progress is not None and (now >= next_report or not remaining):
                self.on_progress(self.stats)
                next_report = now + 0.2

    def _handle(self, event: Event) -> int:
        """Apply one event; 1 when it finished an object."""
        state = self.states[event.obj_id]
        result = state.result
        if isinstance(event, BatchDone):
            retries, batch = event.retries, event.batch
            state.received += 1
            result.requests += retries + 1
            result.retries += retries
            result.bytes_sent += len(batch.body) * (retries + 1)
            self.stats.requests += retries + 1
            self.stats.records_done += len(batch.indexes)
            self.stats.bytes_done += batch.size
            if isinstance(event.outcome, Failure):
                self._fail(state, batch.indexes, event.outcome)
            elif result.failure_kind is None:
                state.pending[event.seq] = event.outcome
                self._flush(state)
        elif isinstance(event, ObjectRead):
            self.stats.bytes_total += event.size - (result.size or 0)
            return 0
        elif isinstance(event, RecordRefused):
            self._fail(state, [event.index], event.failure)
            self.stats.records_done += 1
            self.stats.bytes_done += event.size
            return 0
        else:  # ObjectSplit: the producer is done with the object
            state.total = event.batches
            result.records = event.records
            result.bytes_read = event.bytes_read
            if event.failure is not None:
                self._fail(state, [], event.failure)
        if state.total is not None and state.received == state.total:
            self._finish(state)
            return 1
        return 0

    def _flush(self, state: _State) -> None:
        try:
            while state.next_seq in state.pending:
                data = state.pending.pop(state.next_seq)
                state.next_seq += 1
                if state.output is None:
                    state.output = self.storage.open_output(state.result.output)
                state.output.write(data)
        except OSError as exc:
            self._fail(state, [], _write_failure(state.result.output, exc))

    def _fail(self, state: _State, indexes: list[int], failure: Failure) -> None:
        result = state.result
        message = failure.message
        if result.failure_kind is None:
            result.failure_kind = failure.kind
            state.pending.clear()
            if state.output is not None:
                state.output.discard()
                state.output = None
        result.failed_records.extend(indexes)
        self.stats.records_failed += len(indexes)
        if message not in result.messages and len(result.messages) < MAX_KEPT_MESSAGES:
            result.messages.append(message)
        state.logged += 1
        if state.logged <= MAX_LOGGED_FAILURES:
            log_object(state.label, message)
        elif state.logged == MAX_LOGGED_FAILURES + 1:
            log_object(state.label, "further failures of this object are listed in the job description only")

    def _finish(self, state: _State) -> None:
        result = state.result
        self.stats.objects_done += 1
        if result.failure_kind is None:
            try:
                if state.output is None:  # no records: an empty output
                    state.output = self.storage.open_output(result.output)
                result.bytes_written = state.output.size
                state.output.commit()
                state.output = None
                result.status = Status.COMPLETED
                return
            except Exception as exc:  # noqa: BLE001 - failing to publish fails this object only
                self._fail(state, [], _write_failure(result.output, exc))
        result.status = Status.FAILED
        result.failed_records.sort()
        self.stats.objects_failed += 1
