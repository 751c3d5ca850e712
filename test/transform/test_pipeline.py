"""Unit tests of the runner against a tiny stand-in container (http.server): ordering under concurrency, retries,
failure messages, atomic outputs, headers, chunked bodies, keep-alive, interruption. The real container is
exercised in test_transform_stack.py."""

import json
import logging
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import ports
import pytest
from sagemaker_tfs.transform import TransformJobStopped, cli, transform


class StandIn(BaseHTTPRequestHandler):
    """Reverses each line of the body; lines naming a status (fail400, fail500) get that status, `flaky` lines fail
    with 503 the first time they are seen."""

    protocol_version = "HTTP/1.1"
    wbufsize = -1  # headers and body in one write: no Nagle / delayed-ACK stalls

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        self.server.connections += 1

    def reply(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def do_GET(self):
        if self.path == "/execution-parameters" and self.server.execution_parameters is not None:
            self.reply(200, json.dumps(self.server.execution_parameters).encode())
        else:
            self.reply(200 if self.path == "/ping" else 404, b"")

    def do_POST(self):
        if self.headers.get("Transfer-Encoding") == "chunked":
            body = b""
            while (size := int(self.rfile.readline(), 16)) > 0:
                body += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()
        else:
            body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.requests.append((dict(self.headers), body))
        # responses come back out of order: each body waits its own 0 to 3 ms (the same each run, not drawn)
        time.sleep(zlib.crc32(body) % 4 * 0.001)
        for status in (400, 500):
            if f"fail{status}".encode() in body:
                return self.reply(status, json.dumps({"error": f"failing on purpose: {status}"}).encode())
        if b"flaky" in body and body not in self.server.seen:
            self.server.seen.add(body)
            return self.reply(503, b"busy")
        self.reply(200, b"\n".join(line[::-1] for line in body.split(b"\n")))


@pytest.fixture
def standin():
    server = ThreadingHTTPServer(("127.0.0.1", ports.free_port()), StandIn)
    server.daemon_threads = True
    server.requests, server.seen, server.connections = [], set(), 0
    server.execution_parameters = {"MaxConcurrentTransforms": 4, "BatchStrategy": "SINGLE_RECORD", "MaxPayloadInMB": 6}
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield server
    server.shutdown()
    server.server_close()


def write(folder, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)


def listing(folder) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def run(standin, tmp_path, **params):
    params = {
        "data": str(tmp_path / "in"),
        "output_path": str(tmp_path / "out"),
        "work_dir": str(tmp_path / "work"),
        **params,
    }
    return transform(standin.url, **params)


def test_output_order_is_kept_under_concurrency_and_the_container_answer_is_used(standin, tmp_path):
    lines = [f"record-{i:04d}" for i in range(400)]
    write(tmp_path / "in", {"a.txt": "\n".join(lines) + "\n"})
    description = run(standin, tmp_path, split_type="Line", assemble_with="Line")
    assert description["TransformJobStatus"] == "Completed"
    assert (description["MaxConcurrentTransforms"], description["BatchStrategy"]) == (4, "SingleRecord")
    assert (tmp_path / "out" / "a.txt.out").read_text() == "".join(line[::-1] + "\n" for line in lines)
    assert standin.connections == 1 + 4  # /execution-parameters, then one keep-alive connection per worker
    summary = description["LocalRun"]["Summary"]
    assert (summary["Records"], summary["Requests"], summary["RecordsFailed"]) == (400, 400, 0)


def test_5xx_is_retried_then_fails_only_its_object_with_sagemakers_message(standin, tmp_path, caplog):
    write(tmp_path / "in", {"bad.txt": "ok\nfail500\nok2\n", "good.txt": "a\nb\n"})
    with caplog.at_level(logging.INFO, logger="sagemaker_tfs.transform"):
        description = run(
            standin,
            tmp_path,
            split_type="Line",
            strategy="SingleRecord",
            model_client_config={"InvocationsMaxRetries": 2},
        )
    assert description["TransformJobStatus"] == "Failed"
    assert description["FailureReason"] == "AlgorithmError: See job logs for more information"
    assert listing(tmp_path / "out") == ["good.txt.out"]  # no partial output, no temporary file
    bad, good = description["LocalRun"]["Objects"]
    message = 'Bad HTTP status received from algorithm: 500\n\nMessage:\n{"error": "failing on purpose: 500"}'
    assert (bad["Status"], bad["FailedRecords"], bad["Messages"], bad["Output"]) == ("Failed", [1], [message], None)
    assert (bad["Requests"], bad["Retries"]) == (5, 2)  # 2 records + the failing one 3 times
    assert good["Status"] == "Completed"
    assert f"[sagemaker logs]: {tmp_path}/in/bad.txt: Bad HTTP status received from algorithm: 500" in caplog.text
    assert f"[sagemaker logs]: {tmp_path}/in/bad.txt: Message:" in caplog.text


def test_4xx_is_not_retried_and_is_a_client_error(standin, tmp_path):
    write(tmp_path / "in", {"a.txt": "fail400\nok\nfail400\n"})
    description = run(standin, tmp_path, split_type="Line", strategy="SingleRecord")
    [obj] = description["LocalRun"]["Objects"]
    assert description["FailureReason"] == "ClientError: See job logs for more information"
    assert obj["FailedRecords"] == [0, 2] and obj["Requests"] == 3 and obj["Retries"] == 0
    assert obj["Messages"] == ['ClientError: 400\n\nMessage:\n{"error": "failing on purpose: 400"}']
    assert listing(tmp_path / "out") == []


def test_a_transient_5xx_is_retried_and_the_output_is_complete(standin, tmp_path):
    write(tmp_path / "in", {"a.txt": "x\nflaky\ny"})
    description = run(standin, tmp_path, split_type="Line", strategy="SingleRecord")
    assert description["TransformJobStatus"] == "Completed"
    assert (tmp_path / "out" / "a.txt.out").read_text() == "xykalfy"  # AssembleWith None: back to back
    assert description["LocalRun"]["Summary"]["Retries"] == 1


def test_headers_are_sent_only_when_set_and_no_limit_means_chunked(standin, tmp_path):
    write(tmp_path / "in", {"a.txt": "1\n2\n"})
    run(
        standin,
        tmp_path,
        split_type="Line",
        strategy="MultiRecord",
        max_payload=0,
        content_type="text/csv",
        accept="application/jsonlines",
    )
    [(headers, body)] = standin.requests
    assert body == b"1\n2"  # MultiRecord Line batch: records joined by newlines, no trailing newline
    assert headers["Content-Type"] == "text/csv" and headers["Accept"] == "application/jsonlines"
    assert headers["Transfer-Encoding"] == "chunked" and "Content-Length" not in headers
    standin.requests.clear()
    run(standin, tmp_path, split_type="None", output_path=str(tmp_path / "out2"))
    [(headers, body)] = standin.requests
    assert "Content-Type" not in headers and "Accept" not in headers and headers["Content-Length"] == "4"


def test_records_over_the_limit_fail_their_object_under_each_strategy(standin, tmp_path):
    big = "x" * (1024 * 1024 + 1)
    write(tmp_path / "in", {"big.txt": f"a\n{big}\nb\n", "small.txt": "c\nd\n"})
    for strategy in ("SingleRecord", "MultiRecord"):
        out = tmp_path / f"out-{strategy}"
        description = run(standin, tmp_path, split_type="Line", strategy=strategy, max_payload=1, output_path=str(out))
        big_result, small_result = description["LocalRun"]["Objects"]
        assert big_result["Messages"] == ["Too much data for max payload size"]
        assert big_result["FailedRecords"] == [1]
        assert description["FailureReason"] == "ClientError: See job logs for more information"
        assert listing(out) == ["small.txt.out"]
        assert all(len(body) <= 1024 * 1024 for _, body in standin.requests)


def test_an_endpoint_that_does_not_answer_fails_with_no_response(tmp_path):
    write(tmp_path / "in", {"a.txt": "1"})
    description = transform(
        f"http://127.0.0.1:{ports.free_port()}",
        data=str(tmp_path / "in"),
        output_path=str(tmp_path / "out"),
        model_client_config={"InvocationsMaxRetries": 1},
    )
    [obj] = description["LocalRun"]["Objects"]
    assert obj["Messages"] == ["Unable to get response from algorithm"] and obj["Requests"] == 2
    assert description["FailureReason"] == "AlgorithmError: See job logs for more information"
    assert description["BatchStrategy"] == "MultiRecord" and description["MaxPayloadInMB"] == 6  # defaults


def test_instances_take_whole_objects_by_key_order(standin, tmp_path):
    write(tmp_path / "in", {f"{name}.txt": name for name in "abcde"})
    description = run(standin, tmp_path, instance_count=2)
    assert [o["Instance"] for o in description["LocalRun"]["Objects"]] == [0, 1, 0, 1, 0]
    assert listing(tmp_path / "out") == [f"{name}.txt.out" for name in "abcde"]


def test_an_interrupted_job_is_stopped_and_leaves_no_output(standin, tmp_path):
    write(tmp_path / "in", {"a.txt": "\n".join(str(i) for i in range(2000))})

    def interrupt(stats):
        if stats.records_done >= 10:
            raise KeyboardInterrupt

    with pytest.raises(TransformJobStopped) as stopped:
        run(standin, tmp_path, split_type="Line", strategy="SingleRecord", on_progress=interrupt)
    assert stopped.value.description["TransformJobStatus"] == "Stopped"
    assert stopped.value.description["LocalRun"]["Objects"][0]["Status"] == "Stopped"
    assert not (tmp_path / "out").exists() or listing(tmp_path / "out") == []


def test_no_input_fails_before_anything_starts(tmp_path):
    description = transform("/no/such/model", data=str(tmp_path / "nothing"), output_path=str(tmp_path / "out"))
    assert description["TransformJobStatus"] == "Failed"
    assert description["FailureReason"].startswith("ClientError: No S3 objects found under S3 URL")


def test_the_command_prints_a_summary_writes_the_description_and_exits_with_the_status(standin, tmp_path, capsys):
    write(tmp_path / "in", {"a.txt": "ab\ncd\n", "b.txt": "fail400\n"})
    described = tmp_path / "job.json"
    status = cli.main(
        [
            "--model",
            standin.url,
            "--data",
            str(tmp_path / "in"),
            "--output-path",
            str(tmp_path / "out"),
            "--SplitType",
            "Line",
            "--assemble-with",
            "Line",
            "--describe",
            str(described),
            "--print-request",
        ]
    )
    out, err = capsys.readouterr()
    assert status == 1
    assert json.loads(out)["TransformInput"]["SplitType"] == "Line"  # --print-request: the CreateTransformJob body
    description = json.loads(described.read_text())
    assert description["TransformJobStatus"] == "Failed" and description["LocalRun"]["Summary"]["Records"] == 3
    assert f"Transform job {description['TransformJobName']}: Failed (ClientError: See job logs" in err
    assert "  records   3 (1 failed)" in err and f"failed: {tmp_path}/in/b.txt: 1 of 1 records failed" in err
    assert (tmp_path / "out" / "a.txt.out").read_text() == "ba\ndc\n"
