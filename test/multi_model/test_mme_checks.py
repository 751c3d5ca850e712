"""POST /models: every check of the spec's §3 in its order, with its status and text, through the whole stack;
the confinement cases of §9; a failed load leaves nothing behind."""

from __future__ import annotations

import os
import shutil
import socket

import paths
import processes
import pytest
from mme_support import error, model, predictions

LAYOUT_HELP = (
    "expected <model_dir>/<version>/saved_model.pb or <model_dir>/<model name>/<version>/saved_model.pb, "
    "where <version> is a number such as 1"
)


@pytest.mark.parametrize("body", ["[1]", '"m"', "not json", "", "null"])
def test_a_body_that_is_not_a_json_object_is_400(stack, body):
    answer = stack.call("POST", "/models", body, Content_Type="application/json")
    assert (answer.status, answer.json()) == (
        400,
        error('request body must be a JSON object with "model_name" and "url"'),
    )
    assert answer.headers["x-amzn-requestid"]


@pytest.mark.parametrize(
    "name, why",
    [
        ("", "must not be empty"),
        ("../etc", "must start with a letter or digit and hold only letters, digits, '.', '_' and '-'"),
        ("a/b", "must start with a letter or digit and hold only letters, digits, '.', '_' and '-'"),
        ("-a", "must start with a letter or digit and hold only letters, digits, '.', '_' and '-'"),
        ("a" * 256, "must be at most 255 characters, not 256"),
        (5, "must be a string, not int"),
    ],
)
def test_an_invalid_model_name_is_400_before_the_url_is_looked_at(stack, name, why):
    answer = stack.load(name, "relative/not/checked/yet")
    assert (answer.status, answer.json()) == (400, error(f"invalid model_name '{name}': {why}"))


def test_missing_fields_are_named(stack):
    answer = stack.call("POST", "/models", {"url": "/x"})
    assert (answer.status, answer.json()) == (400, error('missing "model_name"'))
    answer = stack.call("POST", "/models", {"model_name": "m", "other": 1})
    assert (answer.status, answer.json()) == (400, error('missing "url"'))


@pytest.mark.parametrize("url", ["models/m", "./m", "", 7])
def test_a_url_that_is_not_an_absolute_path_is_400(stack, url):
    answer = stack.load("m", url)
    assert (answer.status, answer.json()) == (400, error(f"\"url\" must be an absolute path, got '{url}'"))


def test_a_loaded_name_is_409_before_the_disk_is_read(stack, root):
    url = str(model(root, "taken"))
    try:
        assert stack.load("taken", url).status == 200
        for other_url in (url, "/nowhere/at/all", str(root / "missing")):
            answer = stack.load("taken", other_url)
            assert (answer.status, answer.json()) == (409, error("Model taken is already loaded."))
        assert stack.invoke("taken").text == predictions(2.5, 3.0)  # still served from its own url
    finally:
        stack.unload("taken")


def test_urls_outside_the_model_root_are_400(stack, root, tmp_path):
    outside = model(tmp_path, "outside")
    evil = model(root.parent / "models-evil", "m")  # a sibling whose name starts with the root's
    (root / "link-out").symlink_to(outside)
    cases = [str(outside), f"{root}/../models-evil/m", str(evil), str(root / "link-out"), "/", str(root), f"{root}/.."]
    for url in cases:
        answer = stack.load("out", url)
        assert (answer.status, answer.json()) == (400, error(f"url {url} is outside the model root {root}")), url
    assert stack.listed().json() == {"models": []}


def test_what_a_load_reads_must_resolve_inside_the_url(stack, root, tmp_path):
    outside = model(tmp_path, "outside", script="def handler(data, context):\n    return 'outside code'\n")
    version = root / "version-link"
    version.mkdir()
    (version / "00000123").symlink_to(outside / "00000123")
    code = model(root, "code-link")
    (code / "code").symlink_to(outside / "code")
    script = model(root, "script-link")
    (script / "code").mkdir()
    (script / "code" / "inference.py").symlink_to(outside / "code" / "inference.py")
    named = root / "named-link"
    named.mkdir()
    (named / "half_plus_two").symlink_to(outside)
    variables = model(root, "variables-link")
    shutil.rmtree(variables / "00000123" / "variables")
    (variables / "00000123" / "variables").symlink_to(outside / "00000123" / "variables")
    cases = [
        (version, "00000123"),
        (code, "code"),
        (script, "code/inference.py"),
        (named, "half_plus_two"),
        (variables, "00000123/variables"),
    ]
    for url, entry in cases:
        answer = stack.load("escape", str(url))
        assert (answer.status, answer.json()) == (
            400,
            error(f"{url}/{entry} in model escape resolves outside {url}"),
        ), entry
    assert stack.listed().json() == {"models": []}


def test_symlinks_that_stay_inside_the_url_and_root_are_followed(stack, root):
    real = model(root, "real-folder")
    (root / "inside-link").symlink_to(real)
    try:
        answer = stack.load("via-link", str(root / "inside-link"))
        assert answer.status == 200, answer.text
        assert stack.invoke("via-link").text == predictions(2.5, 3.0)
        assert stack.call("GET", "/models/via-link").json()["modelUrl"] == str(root / "inside-link")
    finally:
        stack.unload("via-link")


def test_a_url_without_one_servable_savedmodel_is_404(stack, root):
    empty = root / "empty"
    empty.mkdir()
    no_pb = root / "no-pb"
    (no_pb / "1").mkdir(parents=True)
    (no_pb / "1" / "notes.txt").write_text("x")
    two = root / "two-models"
    model(two, "a")
    model(two, "b")
    cases = [
        (root / "absent", f"{root}/absent is not a folder"),
        (empty, f"no SavedModel found in {empty}: {LAYOUT_HELP}"),
        (
            no_pb,
            f"version folder {no_pb}/1 has no saved_model.pb (it holds notes.txt); a version folder must "
            "contain a SavedModel as written by tf.saved_model.save",
        ),
        (two, f"{two} holds 2 models (a, b); a multi-model endpoint serves one model per url"),
    ]
    for url, reason in cases:
        answer = stack.load("nothing", str(url))
        assert (answer.status, answer.json()) == (
            404,
            error(f"Could not find valid base path {url} for servable nothing: {reason}"),
        ), url


def test_the_named_layout_of_a_single_model_archive_loads(stack, root):
    url = root / "named"
    model(url, "half_plus_three", paths.HALF_PLUS_THREE)
    try:
        assert stack.load("named", str(url)).status == 200
        assert stack.invoke("named").text == predictions(3.5, 4.0)
    finally:
        stack.unload("named")


def test_a_savedmodel_the_model_server_cannot_load_is_500_and_leaves_nothing_behind(stack, root):
    broken = model(root, "broken")
    (broken / "00000123" / "saved_model.pb").write_bytes(b"this is not a SavedModel")
    answer = stack.load("fragile", str(broken))
    assert answer.status == 500
    assert answer.json()["error"].startswith("Failed to load model fragile: ")
    assert stack.call("GET", "/models/fragile").json() == error("Model fragile is not loaded yet.")
    assert stack.invoke("fragile").json() == error("Model fragile is not loaded yet.")
    assert stack.listed().json() == {"models": []}
    try:  # the same name loads again at once, from a good url
        assert stack.load("fragile", str(model(root, "good-after-broken"))).status == 200
        assert stack.invoke("fragile").text == predictions(2.5, 3.0)
    finally:
        stack.unload("fragile")
    assert os.listdir(stack.runtime_dir)  # runtime files are named by digests and counters, never by model names
    assert not [name for name in os.listdir(stack.runtime_dir) if "fragile" in name]


def test_a_models_request_body_over_64_kib_is_413(stack):
    body = '{"model_name": "big", "url": "/x", "padding": "' + "p" * 65536 + '"}'
    answer = stack.call("POST", "/models", body, Content_Type="application/json")
    assert (answer.status, answer.json()) == (
        413,
        error("The request body is larger than 65536 bytes, the most a /models request may send"),
    )


def test_a_half_sent_models_request_does_not_hold_a_thread_past_the_read_timeout(stack):
    """nginx sends each request whole; a client of the socket itself that stops half-way is dropped (10 s)."""
    sock = socket.socket(socket.AF_UNIX)
    with sock:
        sock.connect(str(stack.runtime_dir / "models.sock"))
        sock.sendall(b"POST /models HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        sock.settimeout(30)  # a guard against a hang: the server ends the connection well before
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
        assert b"HTTP/1.0 200" not in data


def test_client_text_cannot_forge_a_log_line(stack):
    """A model name with a line break, in a load and in an invocation's path: refused, and logged escaped on one
    line, so that no line of serve's log (its children's included) starts with the injected text."""
    injected = "FORGED-LINE serve: model loaded"
    assert stack.load(f"x\n{injected}", "/nowhere").status == 400
    assert (
        stack.call(
            "POST", f"/models/y%0a{injected.replace(' ', '%20')}/invoke", "{}", Content_Type="application/json"
        ).status
        == 404
    )
    log = processes.wait_for_log(stack, "x\\nFORGED-LINE", "y\\nFORGED-LINE")  # both requests logged, escaped
    assert [line for line in log.splitlines() if line.startswith("FORGED-LINE")] == []
