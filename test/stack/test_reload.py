"""SAGEMAKER_RELOAD through the whole stack: a save of code/inference.py restarts the app's workers without a failed
request; a script that no longer imports answers 503 saying where, until a save fixes it; without reload, such a
script still stops serve at start-up."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import paths
import processes
import requests
import serve_stack
from clients import http_status
from model_dirs import copy_model, write_code, write_wheel

BODY = json.dumps({"instances": [1.0, 2.0]})  # half_plus_two: [2.5, 3.0]

PAIR = """
    import json

    def input_handler(data, context):
        return data.read()

    def output_handler(response, context):
        return "{version} " + json.dumps(response.json()["predictions"]), "text/plain"
"""

BROKEN = """
    import json

    def output_handler(response, context)
        return response.content, "application/json"
"""  # line 4 (after dedent, the first line is empty): the missing colon

RELOAD = {"SAGEMAKER_RELOAD": "true", "SAGEMAKER_GUNICORN_WORKERS": "2"}


def model_with(tmp_path: Path, script: str) -> Path:
    return write_code(copy_model(paths.HALF_PLUS_TWO, tmp_path, "model"), script)


def save(model_dir: Path, script: str) -> None:
    write_code(model_dir, script)


def old_workers_gone(stack: serve_stack.Stack, old: set[int]) -> None:
    """Wait until the workers from before a save have exited: until then, each may still answer a request nginx
    sends on a connection it kept to one (wsgi_server/loop.py, drain), with the old code."""
    processes.wait_for(lambda: not stack.gunicorn_workers() & old, timeout=60, what="the old workers to exit")


def start(model_dir: Path) -> serve_stack.Stack:
    stack = serve_stack.Stack(model_dir, env=RELOAD).start()
    processes.wait_for_log(stack, "reload: watching")  # the watcher's first look is taken: later saves count
    return stack


def test_a_save_restarts_the_workers_and_no_request_fails(tmp_path):
    model = model_with(tmp_path, PAIR.format(version="v1"))
    with start(model) as stack:
        answers: list[tuple[int, str]] = []
        done = threading.Event()

        def client() -> None:
            with requests.Session() as session:
                while not done.is_set():
                    response = session.post(
                        stack.url + "/invocations", data=BODY, headers={"Content-Type": "application/json"}, timeout=60
                    )
                    answers.append((response.status_code, response.text))

        thread = threading.Thread(target=client, daemon=True)
        thread.start()
        try:
            processes.wait_for(lambda: len(answers) > 0, timeout=60, what="a first answer")
            save(model, PAIR.format(version="v2"))
            processes.wait_for_log(stack, f"reload: {model / 'code' / 'inference.py'} changed; restarting the app's")
            processes.wait_for(lambda: answers[-1][1].startswith("v2"), timeout=120, what="the new script's answer")
        finally:
            done.set()
            thread.join(60)
    assert [answer for answer in answers if answer[0] != 200] == []
    assert answers[0] == (200, "v1 [2.5, 3.0]")
    assert answers[-1] == (200, "v2 [2.5, 3.0]")
    assert {text for _, text in answers} == {"v1 [2.5, 3.0]", "v2 [2.5, 3.0]"}


# Saves itself as v2 when first imported: the save lands after the worker imported v1, before serve is ready, as an
# editor's save made while serve starts would (the marker, outside code/, makes it once).
SAVES_ITSELF = """
    from pathlib import Path

    MARKER = Path({marker!r})
    if not MARKER.exists():
        MARKER.touch()
        Path(__file__).write_text({v2!r})

    def handler(data, context):
        return "v1", "text/plain"
"""


def test_a_save_made_while_serve_starts_is_not_lost(tmp_path):
    """The watcher's first look at code/ is taken before the workers import it: a save made after their import,
    before serve is ready, restarts them as any later save does (else they would serve the old code until the
    next save)."""
    v2 = 'def handler(data, context):\n    return "v2", "text/plain"\n'
    model = model_with(tmp_path, SAVES_ITSELF.format(marker=str(tmp_path / "saved"), v2=v2))
    with serve_stack.Stack(model, env={**RELOAD, "SAGEMAKER_GUNICORN_WORKERS": "1"}) as stack:
        assert (tmp_path / "saved").exists()  # the worker imported v1 and saved v2
        processes.wait_for_log(stack, f"reload: {model / 'code' / 'inference.py'} changed; restarting the app's")
        processes.wait_for(
            lambda: requests.post(stack.url + "/invocations", data=b"x", timeout=30).text == "v2",
            timeout=120,
            what="the saved script's answer",
        )


def test_a_script_that_stops_importing_answers_503_saying_where_until_fixed(tmp_path):
    model = model_with(tmp_path, PAIR.format(version="v1"))
    script = model / "code" / "inference.py"
    with start(model) as stack:
        old = stack.gunicorn_workers()
        save(model, BROKEN)
        processes.wait_for(lambda: http_status(stack.url + "/ping") == 503, timeout=120, what="/ping 503")
        old_workers_gone(stack, old)
        ping = requests.get(stack.url + "/ping", timeout=10)
        message = ping.json()["error"]
        assert message.startswith(f"{script} failed to import: SyntaxError: ")
        assert "(inference.py, line 4)" in message
        invocation = requests.post(stack.url + "/invocations", data=BODY, timeout=10)
        assert (invocation.status_code, invocation.json()) == (503, {"error": message})
        assert stack.alive()  # gunicorn did not exit: serve keeps running

        old = stack.gunicorn_workers()
        save(model, PAIR.format(version="fixed"))
        processes.wait_for(lambda: http_status(stack.url + "/ping") == 200, timeout=120, what="/ping 200")
        old_workers_gone(stack, old)
        answer = requests.post(
            stack.url + "/invocations", data=BODY, headers={"Content-Type": "application/json"}, timeout=10
        )
        assert (answer.status_code, answer.text) == (200, "fixed [2.5, 3.0]")


def test_without_reload_a_broken_script_still_stops_serve_at_start_up(tmp_path):
    model = model_with(tmp_path, BROKEN)
    stack = serve_stack.Stack(model)
    result = subprocess.run([str(paths.VENV_BIN / "serve")], env=stack.env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 1, result.stderr
    assert f"cannot start: {model / 'code' / 'inference.py'} failed to import: SyntaxError: " in result.stderr


IMPORTS_LATER = """
    def handler(data, context):
        try:
            import reloaddemo
        except ImportError:
            return "not installed", "text/plain"
        return reloaddemo.VALUE, "text/plain"
"""


def test_a_saved_requirements_txt_is_installed_before_the_workers_restart(tmp_path):
    model = model_with(tmp_path, IMPORTS_LATER)
    code = model / "code"
    try:
        with start(model) as stack:
            assert requests.post(stack.url + "/invocations", data=b"x", timeout=30).text == "not installed"
            old = stack.gunicorn_workers()
            write_wheel(code / "wheels", "reloaddemo", "reloaddemo 0.1, installed at a reload")
            (code / "requirements.txt").write_text(f"--no-index\n--find-links {code / 'wheels'}\nreloaddemo==0.1\n")
            processes.wait_for_log(stack, "Successfully installed reloaddemo-0.1")
            processes.wait_for(
                lambda: requests.post(stack.url + "/invocations", data=b"x", timeout=30).text != "not installed",
                timeout=120,
                what="the workers to import the new package",
            )
            old_workers_gone(stack, old)
            answer = requests.post(stack.url + "/invocations", data=b"x", timeout=30)
            assert (answer.status_code, answer.text) == (200, "reloaddemo 0.1, installed at a reload")
    finally:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", "reloaddemo"], capture_output=True)
