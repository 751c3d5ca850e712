"""Log lines of `serve`, the app and the model server: text (each process's usual layout) or one JSON object per
line (SAGEMAKER_LOG_FORMAT=json), so that CloudWatch-like systems can search them by field.

A JSON line has `time` (ISO 8601, UTC, milliseconds), `level`, `logger`, `process`, `message`, `exception` when
there is a traceback, and `request_id` on every line logged while the app handles a request (the request's
X-Amzn-RequestId, set by the app for the duration of the request: the user's script's lines get it too).
Imports nothing heavy.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import re
import time
from collections.abc import Callable, Mapping

TEXT, JSON = "text", "json"
FORMATS = (TEXT, JSON)
FORMAT_VARIABLE = "SAGEMAKER_LOG_FORMAT"


def format_from_env(env: Mapping[str, str] | None = None) -> str:
    """SAGEMAKER_LOG_FORMAT alone, for a process that logs before (or without) reading every setting: `serve`
    before it validates the others, gunicorn's settings file, the embedded model server. An invalid value is "text"
    here (config.Settings, the full read, reports it)."""
    value = (os.environ if env is None else env).get(FORMAT_VARIABLE, "").strip().lower()
    return value if value in FORMATS else TEXT


# The request being handled by this thread (the app sets it): every line logged meanwhile names it.
request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "process": record.process,
            "message": record.getMessage(),
        }
        rid = getattr(record, "request_id", None) or request_id.get()
        if rid:
            entry["request_id"] = rid
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False)


# Characters that would end or rewrite a text log line (line breaks, carriage returns, escape sequences, Unicode
# line separators). Client text (model names, paths, custom attributes) reaches log messages: escaped, it cannot
# forge a line. Tabs stay, and so does a line break before a space: an indented continuation line (serve quotes a
# failed child's last lines so) can never be taken for a record of its own, which starts with its time.
_CONTROL = re.compile("\n(?! )|[\x00-\x08\x0b-\x1f\x7f\x85\u2028\u2029]")
_ESCAPES = {"\n": "\\n", "\r": "\\r"}


def escape_controls(text: str) -> str:
    """text with each control character written as an escape (\\n, \\r, \\x1b, \\u2028), but for line breaks
    that start an indented line."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(lambda m: _ESCAPES.get(m[0]) or m[0].encode("unicode_escape").decode("ascii"), text)


class TextFormatter(logging.Formatter):
    """A text line per record: the formatted message with its control characters escaped (escape_controls), the
    traceback after it as it is (multi-line on purpose; it holds no client text the message does not)."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging.Formatter's name
        return escape_controls(super().formatMessage(record))


def formatter(log_format: str, text_format: str, text_datefmt: str | None = None) -> logging.Formatter:
    """The formatter of a process: JSON (json.dumps escapes), or its usual text layout, escaped."""
    return JsonFormatter() if log_format == JSON else TextFormatter(text_format, text_datefmt)


def configure(level: str, log_format: str) -> None:
    """The app's log lines (and the handler script's) on stderr next to gunicorn's, in gunicorn's text layout or
    as JSON, unless the host process set up logging already; `level` for the sagemaker_tfs loggers."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(
            formatter(
                log_format, "[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: %(message)s", "%Y-%m-%d %H:%M:%S %z"
            )
        )
        root.addHandler(handler)
    logging.getLogger("sagemaker_tfs").setLevel(level.upper())


def quiet_tensorflow() -> None:
    """TensorFlow's C++ start-up noise (oneDNN banners, CUDA probes on CPU machines, CPU feature notes) off, its
    warnings and errors still shown: level 2 unless the user chose a level. Before TensorFlow is imported; children
    inherit it."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


# TensorFlow 2.16+ writes some INFO lines through absl before its own level applies (the oneDNN banner, the CUDA
# probe): `I<MMDD> <time> <thread> <file>:<line>] ...`, after absl's one-line notice. `serve` drops them from its
# children's output unless TF_CPP_MIN_LOG_LEVEL=0 asks for everything; W, E and F lines always pass.
_NATIVE_INFO = re.compile(rb"I\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^ \]]+:\d+\] ")  # before absl's init: 00:00:<epoch>
_ABSL_NOTICE = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"


def tensorflow_noise_filter() -> Callable[[bytes], bool] | None:
    """A predicate on output lines (bytes) that is true for TensorFlow's native INFO lines, or None when
    TF_CPP_MIN_LOG_LEVEL=0 asks for them."""
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0") == "0":
        return None
    return lambda line: line.startswith(_ABSL_NOTICE) or _NATIVE_INFO.match(line) is not None
