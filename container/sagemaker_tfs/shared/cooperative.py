"""Waiting without holding up the app worker's event loop (wsgi_server/loop.py).

The loop worker serves every connection of its process in one thread: each request runs in a greenlet of its own,
and where the app waits for a socket (the model server's answer, a slow client) or for a gRPC call, the greenlet
hands the thread back to the loop (`Hub.wait`, `Hub.wait_future`), which resumes it once the socket is ready. No
thread changes hands on the way, so no lock is taken and the GIL is not passed around (docs/BENCHMARKS.md).

The app's code knows whether it runs in such a greenlet through `hub()`: None in any other thread (a script moved
to threads, the registry's subscriber, tests calling the app directly), where the same code blocks as usual.

A handler script's functions (`call_script`) run in the loop's thread once they have shown that they are quick, as
the original's gevent worker runs them; a function that blocks the thread without waiting through the hub
(`time.sleep`, `requests.post` to another service, a file read) would hold up every request of the worker meanwhile.
So each function starts on probation, in the hub's script threads: after TRUSTED_CALLS calls that each took under
HOLD_LIMIT there, it runs inline. A function that always waits never gets there, and one that blocks forever on its
first call holds up only its own request. Inline, a call that held the thread HOLD_LIMIT or more makes the function
a suspect: its next calls are watched (the kernel's count of the thread's voluntary context switches, which a call
that blocks raises and a call that was only preempted does not), and the first watched call that blocked that long
sends its calls back to threads for good.

The script threads are the hub's own, not a ThreadPoolExecutor: a queue of calls, each outcome handed back through
`Hub.wake`, which resumes the call's greenlet. The executor's future (a condition and its lock per call), its
semaphores and the future's callback cost a call in a thread 20 to 40 µs more of the worker's CPU, and a script that
blocks 5 ms at 32 connections 0.90x of the same wait in the model server against 1.01x (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import _thread
import collections
import contextvars
import heapq
import itertools
import logging
import os
import queue
import resource
import select
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from time import perf_counter
from typing import Any

from greenlet import getcurrent, greenlet

from .sockets import message_parts

log = logging.getLogger("sagemaker_tfs.app")

# epoll's event bits (Linux; elsewhere this module still imports, and only the loop worker cannot run)
READ, WRITE = getattr(select, "EPOLLIN", 1), getattr(select, "EPOLLOUT", 4)
HOLD_LIMIT = 0.001  # seconds a script function may hold the loop's thread before it is suspected of blocking
TRUSTED_CALLS = 16  # quick calls in a thread after which a function runs inline
SCRIPT_THREADS_AT_ONCE = 64  # script threads started together when a call finds none idle (Hub._more_threads)
WATCHED_CALLS = 8  # calls of a suspected function watched before it is cleared (it was preempted, not blocked)
IDLE_GREENLETS = 256  # request greenlets kept parked for the next requests


_Call = tuple["RequestGreenlet", Callable, tuple, contextvars.Context]  # a script call for a script thread


class RequestGreenlet(greenlet):
    """A request's greenlet: its hub, and the seconds it spent waiting through the hub (not holding the thread);
    while a suspected script function runs in it (`watched`), the voluntary context switches of those waits.
    Each runs one task after another, parked between them (a new greenlet costs a mapping of memory for its
    frames, and the unmapping after: two system calls a request)."""

    def __init__(self, hub: Hub):
        super().__init__(self._serve, hub.loop)  # its parent is the loop: when it ends, the loop goes on
        self.hub = hub
        self.waited = 0.0
        self.watched = False
        self.switches_waited = 0

    def _serve(self, task: Callable[[], None]) -> None:
        hub = self.hub
        while True:
            self.gr_context = contextvars.Context()  # each task's context variables its own, as a new thread's
            try:
                task()
            except Exception:  # the tasks answer their own errors: this is a bug, and the worker goes on
                log.exception("Error in the worker's loop")
            if len(hub.idle) >= IDLE_GREENLETS:
                return
            hub.idle.append(self)
            task = hub.loop.switch()  # parked until Hub.spawn hands it the next task


def voluntary_switches() -> int:
    """How many times this thread gave up its CPU (blocked in the kernel) so far."""
    return resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw


def hub() -> Hub | None:
    """The hub of the loop this code runs under, None outside a request greenlet (then block as usual)."""
    return getattr(getcurrent(), "hub", None)


def call_script(fn: Callable, *args: Any) -> Any:
    """fn(*args), a handler script's function: inline, or in a thread when it blocks (see the module's text)."""
    current = hub()
    return fn(*args) if current is None else current.call_script(fn, args)


_STEPS: weakref.WeakSet[Callable] = weakref.WeakSet()  # script_step's functions


def script_step(end: object) -> Callable[[Any], Any]:
    """The next item of an iterator a script returned (`end` after its last), taken as a script function is called:
    a generator's code runs then, and may block. Each generator function is judged apart (one step function per
    code object), so that one that blocks sends only its own steps to threads. A step slow in a thread keeps them
    there for good: a generator's steps alternate, quick ones (its first, its end) and the waits between its parts,
    and streams that start together would give TRUSTED_CALLS quick first steps before any wait had ended."""
    steps: dict[Any, Callable[[Any], Any]] = {}

    def step(parts: Any) -> Any:
        key = getattr(parts, "gi_code", None) or type(parts)
        fn = steps.get(key)
        if fn is None:

            def fn(iterator: Any) -> Any:
                return next(iterator, end)

            fn.__qualname__ = str(getattr(key, "co_qualname", None) or getattr(key, "__qualname__", "an iterator"))
            steps[key] = fn
            _STEPS.add(fn)
        return call_script(fn, parts)

    return step


class Watch:
    """A socket registered with the hub for good: a request greenlet may wait on it; when none does, an event
    means the peer closed it (or sent what nobody asked for) and `on_idle` runs."""

    __slots__ = ("waiter", "seq", "on_idle")

    def __init__(self, on_idle: Callable[[], None]):
        self.waiter: greenlet | None = None
        self.seq = 0
        self.on_idle = on_idle

    def ready(self, mask: int) -> None:
        waiter = self.waiter
        if waiter is None:
            self.on_idle()
        else:
            waiter.switch(True)


class Hub:
    """The loop's epoll, timers and wake-ups, run by one thread (the worker's main thread). Each registered file
    has a handler whose ready(mask) the loop calls on its events (epoll itself, not the selectors module: this is
    the loop's innermost step, and the worker's class runs on Linux)."""

    def __init__(self, thread_limit: int):
        self._epoll = select.epoll()
        self._handlers: dict[int, Any] = {}  # fd -> its handler
        self.loop = getcurrent()
        self._thread = threading.get_ident()  # the loop's
        self._timers: list[tuple[float, int, Watch, greenlet]] = []  # (deadline, seq, watch, waiter), a heap
        self._stale = 0  # timers in the heap whose wait ended otherwise
        self._seq = itertools.count(1)
        self._starts: collections.deque[tuple[RequestGreenlet, Callable[[], None]]] = collections.deque()
        self.idle: list[RequestGreenlet] = []  # parked request greenlets
        self.pools: dict[Any, list] = {}  # idle things of the loop's users (the HTTP client's connections by port)
        self._woken: collections.deque[tuple[greenlet | _Done, Any]] = collections.deque()
        self._wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.register(self._wake_fd, self)
        self._thread_limit = thread_limit
        self._calls: queue.SimpleQueue[_Call] = queue.SimpleQueue()  # script calls for the script threads
        self._idle_threads: list[None] = []  # an item per script thread waiting for a call (append, pop: atomic)
        self._thread_count = 0
        self._quick: dict[Any, int] = {}  # function on probation -> its quick calls so far
        self._inline: set[Any] = set()  # functions that run inline
        self._suspects: dict[Any, int] = {}  # inline function -> calls still to watch
        self._blocking: set[Any] = set()  # functions seen blocking the loop: in threads for good

    # --- the loop ---
    def poll(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for events, run what they woke, then start the tasks they spawned."""
        timers = self._timers
        if self._starts or self._woken:
            timeout = 0
        elif timers:
            timeout = max(0.0, min(timeout, timers[0][0] - perf_counter()))
        handlers = self._handlers
        for fd, mask in self._epoll.poll(timeout):
            handler = handlers.get(fd)
            if handler is None:  # unregistered by an earlier event of this batch
                continue
            try:
                handler.ready(mask)
            except Exception:  # each handles its own errors: this is a bug, and the loop goes on
                log.exception("Error in the worker's loop")
        starts = self._starts
        while starts:
            runner, task = starts.popleft()
            runner.switch(task)
        if self._woken:
            self._resume_woken()
        if timers:
            now = perf_counter()
            while timers and timers[0][0] <= now:
                _, seq, watch, waiter = heapq.heappop(timers)
                # still waiting: time is up
                if watch.waiter is not None and watch.waiter is waiter and watch.seq == seq:
                    watch.waiter = None
                    waiter.switch(False)
                else:
                    self._stale -= 1
            if self._stale > 64 and self._stale * 2 > len(timers):  # timers of waits that ended: drop them
                timers[:] = [t for t in timers if t[2].waiter is t[3] and t[2].seq == t[1]]
                heapq.heapify(timers)
                self._stale = 0

    def spawn(self, task: Callable[[], None]) -> None:
        """Run `task` in a request greenlet once the current events are handled."""
        self._starts.append((self.idle.pop() if self.idle else RequestGreenlet(self), task))

    def ready(self, mask: int) -> None:  # the wake-up eventfd
        try:
            os.eventfd_read(self._wake_fd)
        except BlockingIOError:
            pass
        self._resume_woken()

    def _resume_woken(self) -> None:
        woken = self._woken
        while woken:
            waiter, value = woken.popleft()
            waiter.switch(value)

    def wake(self, waiter: greenlet | _Done, value: Any = None) -> None:
        """Resume `waiter` with `value` in the loop; callable from any thread (from the loop's own, no system call:
        the loop resumes it after the current events)."""
        self._woken.append((waiter, value))
        if threading.get_ident() != self._thread:
            os.eventfd_write(self._wake_fd, 1)

    # --- files and their handlers ---
    def register(self, file: Any, handler: Any, events: int = READ) -> None:
        """Call handler.ready(mask) on the file's events (a file object with fileno(), or a descriptor)."""
        fd = file if isinstance(file, int) else file.fileno()
        self._epoll.register(fd, events)
        self._handlers[fd] = handler

    def unregister(self, file: Any) -> None:
        """No more events of this file; nothing when it is not registered (or already closed)."""
        fd = file if isinstance(file, int) else file.fileno()
        if self._handlers.pop(fd, None) is not None:
            try:
                self._epoll.unregister(fd)
            except OSError:
                pass

    def _modify(self, file: Any, events: int, handler: Any) -> bool:
        """Change what a registered file is watched for; False when it is not registered."""
        fd = file.fileno()
        if fd not in self._handlers:
            return False
        self._epoll.modify(fd, events)
        self._handlers[fd] = handler
        return True

    # --- waiting, from a request greenlet ---
    def watch(self, sock: Any, on_idle: Callable[[], None]) -> Watch:
        """Register a socket for good (see Watch)."""
        watch = Watch(on_idle)
        self.register(sock, watch)
        return watch

    def wait(self, sock: Any, watch: Watch, events: int, timeout: float | None) -> bool:
        """Suspend the calling request greenlet until `sock` (registered with `watch`) is ready for `events`;
        False when `timeout` seconds passed first."""
        current = getcurrent()
        seq = next(self._seq)
        watch.waiter, watch.seq = current, seq
        restore = events != READ
        if restore and not self._modify(sock, events, watch):  # not registered (a client's that ended reading)
            self.register(sock, watch, events)
            restore = False
        if timeout is not None:
            heapq.heappush(self._timers, (perf_counter() + timeout, seq, watch, current))
        try:
            return self._suspend(current)
        finally:
            if watch.waiter is not None or timeout is None:  # woken by the socket: its timer (if any) is stale
                watch.waiter = None
                self._stale += timeout is not None
            if events != READ:
                try:
                    if restore:
                        self._modify(sock, READ, watch)
                    else:
                        self.unregister(sock)
                except OSError:  # closed meanwhile
                    pass

    def wait_future(self, future: Future, timeout: float | None = None) -> Any:
        """The result of a future completed in another thread or greenlet (a gRPC call, a script in a thread), the
        calling request greenlet suspended meanwhile; TimeoutError when `timeout` seconds pass first (the work goes
        on, its result unread)."""
        if not future.done():
            current = getcurrent()
            if timeout is None:
                future.add_done_callback(lambda _: self.wake(current))
                self._suspend(current)
            else:
                # a Watch of no file: its waiter is this wait's, woken by the future or by the timer, whichever
                # comes first (each checks that the wait is still this one)
                watch, seq = Watch(_nothing), next(self._seq)
                watch.waiter, watch.seq = current, seq
                heapq.heappush(self._timers, (perf_counter() + timeout, seq, watch, current))
                future.add_done_callback(lambda _: self.wake(_Done(watch, seq), True))
                if not self._suspend(current):
                    raise TimeoutError(f"no result in {timeout} s")
                self._stale += 1  # its timer
        return future.result()

    def _suspend(self, current: RequestGreenlet) -> Any:
        """Hand the thread to the loop until it resumes `current` (with the value returned); the time counts as
        waited, and so do the thread's voluntary context switches meanwhile while a suspect runs (`watched`)."""
        switches = voluntary_switches() if current.watched else 0
        started = perf_counter()
        try:
            return self.loop.switch()
        finally:
            current.waited += perf_counter() - started
            if current.watched:
                current.switches_waited += voluntary_switches() - switches

    def send_all(self, sock: Any, watch: Any, head: bytes, body: Any, timeout: float | None) -> bool:
        """Write an HTTP message on a non-blocking socket registered with `watch` (sockets.message_parts), waiting
        through the loop while it takes no more; False when one wait lasted `timeout`. OSError as the socket
        raises it."""
        parts = message_parts(head, body)
        if len(parts) == 1:  # most messages: one send takes them whole
            part = parts[0]
            try:
                sent = sock.send(part)
            except BlockingIOError:
                sent = 0
            if sent == len(part):
                return True
            parts = (memoryview(part)[sent:],)
        for part in parts:
            view = memoryview(part)
            while view:
                try:
                    view = view[sock.send(view) :]
                except BlockingIOError:
                    if not self.wait(sock, watch, WRITE, timeout):
                        return False
        return True

    # --- script functions ---
    def call_script(self, fn: Callable, args: tuple) -> Any:
        if fn not in self._inline:
            return self._in_thread(fn, args)
        current = getcurrent()
        if fn in self._suspects:
            return self._watch_call(fn, args, current)
        waited = current.waited
        started = perf_counter()
        try:
            return fn(*args)
        finally:
            if perf_counter() - started - (current.waited - waited) >= HOLD_LIMIT:
                self._suspects[fn] = WATCHED_CALLS

    def _in_thread(self, fn: Callable, args: tuple) -> Any:
        """A call in a script thread, in the request's context (its request id on log lines, as inline), the
        request's greenlet suspended meanwhile; a function on probation is trusted after TRUSTED_CALLS quick calls
        there."""
        current = getcurrent()
        try:
            self._idle_threads.pop()
        except IndexError:  # none waits: more, up to the limit (else the call waits for one)
            self._more_threads()
        self._calls.put((current, fn, args, contextvars.copy_context()))
        ok, result, took = self._suspend(current)
        if not ok:
            raise result
        if took >= HOLD_LIMIT:  # trusted only after TRUSTED_CALLS quick calls in a row
            self._quick.pop(fn, None)
            if fn in _STEPS:  # a generator that waits between its parts: in threads for good (script_step)
                self._blocking.add(fn)
        elif fn not in self._blocking:
            quick = self._quick[fn] = self._quick.get(fn, 0) + 1
            if quick >= TRUSTED_CALLS:
                del self._quick[fn]
                self._inline.add(fn)
        return result

    def _more_threads(self) -> None:
        """SCRIPT_THREADS_AT_ONCE more script threads (up to the limit), one for the call that found none idle.
        Started one by one as calls came, 64 streams starting together had their first parts 50 to 100 ms late: each
        new thread's first turn for the GIL came between the loop's turns (BENCHMARKS). Not threading.Thread.start,
        which waits until the thread runs."""
        more = min(SCRIPT_THREADS_AT_ONCE, self._thread_limit - self._thread_count)
        for number in range(self._thread_count + 1, self._thread_count + more + 1):
            _thread.start_new_thread(self._serve_calls, (f"script_{number}",))
        self._thread_count += more
        self._idle_threads.extend([None] * (more - 1))

    def _serve_calls(self, name: str) -> None:
        """A script thread: calls one after another, each outcome handed to the loop, which resumes the call's
        greenlet with it: (True, the value, seconds taken) or (False, the exception, seconds taken)."""
        threading.current_thread().name = name  # (threading's stand-in for a thread it did not start)
        calls, idle, wake = self._calls, self._idle_threads, self.wake
        while True:
            waiter, fn, args, context = calls.get()
            started = perf_counter()
            try:
                ok, result = True, context.run(fn, *args)
            except BaseException as exc:  # noqa: BLE001 (raised in the request's greenlet, as inline)
                ok, result = False, exc
            took = perf_counter() - started
            del fn, args, context  # (the call's objects are not kept until the next call)
            idle.append(None)
            wake(waiter, (ok, result, took))
            del waiter, result

    def _watch_call(self, fn: Callable, args: tuple, current: RequestGreenlet) -> Any:
        """A call of a suspected function, with the thread's voluntary context switches counted around it."""
        waited, switches_waited = current.waited, current.switches_waited
        current.watched = True
        switches = voluntary_switches()
        started = perf_counter()
        try:
            return fn(*args)
        finally:
            held = perf_counter() - started - (current.waited - waited)
            blocked = voluntary_switches() - switches - (current.switches_waited - switches_waited)
            current.watched = False
            left = self._suspects.pop(fn, 0)  # another request may have decided meanwhile
            if held >= HOLD_LIMIT and blocked > 0:
                self._inline.discard(fn)
                self._blocking.add(fn)
                log.warning(
                    "%s blocked the worker's loop for %.1f ms: its calls run in threads from now on, so "
                    "that each holds up only its own request",
                    _name(fn),
                    held * 1e3,
                )
            elif left > 1 and fn in self._inline:
                self._suspects[fn] = left - 1  # after WATCHED_CALLS calls that did not block, it is cleared


class _Done:
    """Wakes a timed wait for a future (Hub.wait_future) unless its timer did first."""

    __slots__ = ("watch", "seq")

    def __init__(self, watch: Watch, seq: int):
        self.watch, self.seq = watch, seq

    def switch(self, value: Any) -> None:
        waiter = self.watch.waiter
        if waiter is not None and self.watch.seq == self.seq:
            self.watch.waiter = None
            waiter.switch(value)


def _nothing() -> None:
    pass


def _name(fn: Callable) -> str:
    return getattr(fn, "name", None) or getattr(fn, "__qualname__", None) or repr(fn)
