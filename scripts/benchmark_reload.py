#!/usr/bin/env python
"""How long `serve --reload` takes from a save of code/inference.py to the first answer of the new script, with a
client sending requests meanwhile (issue 48's bound: within 3 s, no failed request). Runs the whole stack on free
ports with the test suite's helpers; prints each round and the median."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "test"))

import paths  # noqa: E402
import processes  # noqa: E402
import requests  # noqa: E402
import serve_stack  # noqa: E402
from model_dirs import copy_model, write_code  # noqa: E402

SCRIPT = """
    def input_handler(data, context):
        return data.read()

    def output_handler(response, context):
        return "{version}", "text/plain"
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    model = write_code(copy_model(paths.HALF_PLUS_TWO, Path(tempfile.mkdtemp()), "model"), SCRIPT.format(version=0))
    env = {"SAGEMAKER_RELOAD": "true"}
    with serve_stack.Stack(model, env=env) as stack:
        processes.wait_for_log(stack, "reload: watching")
        seen: dict[str, float] = {}
        failed: list[int] = []
        done = threading.Event()

        def client() -> None:
            session = requests.Session()
            while not done.is_set():
                answer = session.post(stack.url + "/invocations", data=json.dumps({"instances": [1.0]}), timeout=60)
                if answer.status_code != 200:
                    failed.append(answer.status_code)
                seen.setdefault(answer.text, time.monotonic())

        thread = threading.Thread(target=client)
        thread.start()
        delays = []
        for version in range(1, rounds + 1):
            saved = time.monotonic()
            write_code(model, SCRIPT.format(version=version))
            while str(version) not in seen:
                time.sleep(0.01)
            delays.append(seen[str(version)] - saved)
            print(f"round {version}: new answers {delays[-1]:.2f} s after the save", flush=True)
        done.set()
        thread.join()
    print(f"median {statistics.median(delays):.2f} s, max {max(delays):.2f} s; failed requests: {len(failed)}")
    return 0 if not failed and max(delays) <= 3 else 1


if __name__ == "__main__":
    sys.exit(main())
