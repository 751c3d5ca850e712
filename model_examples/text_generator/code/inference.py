"""Generate text one character at a time, each sent to the client as soon as it is made (a streamed answer).

    curl --no-buffer localhost:8080/invocations -H 'Content-Type: application/json' \\
        -d '{"prompt": "the client ", "max_tokens": 5}'
    {"token": "r"}
    {"token": "e"}
    ...
    {"done": true, "text": "reads"}

The request is JSON: `prompt` (a string of the vocabulary's characters; optional, default "") and `max_tokens` (1 to
MAX_TOKENS). Each step sends the text's last CONTEXT characters as token ids to the model server (one REST call per
character, over `context.session`'s keep-alive connections), takes the likeliest next character (greedy: the same
prompt always gets the same text) and yields it as one JSON line; the last line has the whole generated text. The
handler returns a generator, so the container sends each line as it is yielded (application/jsonlines, chunked).

Stateful sessions (`X-Amzn-SageMaker-Session-Id`): a request with NEW_SESSION opens one (`context.open_session()`)
and the text so far (prompt and generated characters) is kept under its id in this worker's memory; a request with
that id goes on from there (`{"max_tokens": N}`, a `prompt` is appended first), and `{"close": true}` closes it.
Without the header, each request stands alone. Plain Python: no TensorFlow, no numpy.
"""

import json
import time
from pathlib import Path

from sagemaker_tfs import HandlerError
from sagemaker_tfs.codecs import media_type

_VOCABULARY = json.loads((Path(__file__).resolve().parent / "vocabulary.json").read_text())  # build.py reads it too
CONTEXT = _VOCABULARY["context"]  # the model's input is int32 [None, CONTEXT]
TOKENS = _VOCABULARY["tokens"]  # the model's output is float32 [None, len(TOKENS)], by token id
PAD = 0  # TOKENS[0]: the padding on the left of a short text, never a character
IDS = {character: token for token, character in enumerate(TOKENS) if token != PAD}
MAX_TOKENS = 1000
FIELDS = ("prompt", "max_tokens", "close")
JSON, JSON_LINES = "application/json", "application/jsonlines"
NEW_SESSION = "NEW_SESSION"
SESSION_SECONDS = 1200.0  # how long an open session lasts (AWS's 20 minutes)
SESSIONS: dict[str, tuple[str, float]] = {}  # session id -> (the text so far, when the session expires)


def handler(data, context):
    request = read_request(data.read(), context.request_content_type)
    session_id = context.session_id
    forget_expired()
    if request.get("close"):
        text_of(session_id, "close")  # a 400 unless this worker has the session
        context.close_session()
        del SESSIONS[session_id]
        return json.dumps({"closed": session_id}), JSON
    # Open the session before the generator's first part: the answer's headers go out with it.
    if session_id == NEW_SESSION:
        session_id = context.open_session(SESSION_SECONDS)
        text = request["prompt"]
    elif session_id is not None:
        text = text_of(session_id, "continue") + request["prompt"]
    else:
        text = request["prompt"]
    if session_id is not None:
        SESSIONS[session_id] = (text, time.monotonic() + SESSION_SECONDS)
    return generate(context, text, request["max_tokens"], session_id), JSON_LINES


def read_request(body, content_type):
    """The request as {"prompt": str, "max_tokens": int} or {"close": True}; HandlerError 400/415 otherwise."""
    if media_type(content_type) != JSON:
        raise HandlerError(415, f'send JSON ({{"prompt": "...", "max_tokens": N}}), not {content_type}')
    try:
        request = json.loads(body)
    except ValueError as exc:  # invalid JSON or UTF-8
        raise HandlerError(400, f"the request is not JSON ({exc})") from None
    if not isinstance(request, dict):
        raise HandlerError(400, 'send a JSON object: {"prompt": "...", "max_tokens": N}')
    unknown = sorted(set(request) - set(FIELDS))
    if unknown:
        raise HandlerError(400, f"unknown field(s) {', '.join(unknown)}: the fields are {', '.join(FIELDS)}")
    if "close" in request:
        if request["close"] is not True or len(request) > 1:
            raise HandlerError(400, 'close a session with {"close": true} alone')
        return request
    prompt = request.get("prompt", "")
    if not isinstance(prompt, str):
        raise HandlerError(400, f"prompt must be a string, not {json.dumps(prompt)}")
    unknown_characters = sorted(set(prompt) - set(IDS))
    if unknown_characters:
        raise HandlerError(
            400,
            f"prompt has characters the model does not know: {json.dumps(''.join(unknown_characters))} "
            f"(it knows {json.dumps(''.join(TOKENS[PAD + 1 :]))})",
        )
    max_tokens = request.get("max_tokens")
    if type(max_tokens) is not int or not 1 <= max_tokens <= MAX_TOKENS:
        raise HandlerError(400, f"max_tokens must be an integer from 1 to {MAX_TOKENS}, not {json.dumps(max_tokens)}")
    return {"prompt": prompt, "max_tokens": max_tokens}


def text_of(session_id, action):
    """The text so far of a session this worker keeps; HandlerError 400 for none or another."""
    if session_id is None or session_id == NEW_SESSION:
        raise HandlerError(400, f"{action} needs an open session: send its id in X-Amzn-SageMaker-Session-Id")
    if session_id not in SESSIONS:
        raise HandlerError(400, f"session {session_id} is not open here: it was closed or expired, or never opened")
    return SESSIONS[session_id][0]


def forget_expired():
    now = time.monotonic()
    for session_id in [s for s, (_, expires) in SESSIONS.items() if expires <= now]:
        del SESSIONS[session_id]


def generate(context, text, max_tokens, session_id):
    """One JSON line per new character, each as soon as the model server has chosen it, then the whole text."""
    generated = ""
    for _ in range(max_tokens):
        character = next_character(context, text + generated)
        generated += character
        if session_id in SESSIONS:  # kept as it grows: a client that goes away keeps what it was sent
            SESSIONS[session_id] = (text + generated, time.monotonic() + SESSION_SECONDS)
        yield json.dumps({"token": character}) + "\n"
    yield json.dumps({"done": True, "text": generated}) + "\n"


def next_character(context, text):
    """The likeliest character after `text`: one call to the model server with its last CONTEXT characters."""
    ids = [IDS[character] for character in text[-CONTEXT:]]
    tokens = [PAD] * (CONTEXT - len(ids)) + ids
    answer = context.session.post(context.rest_uri, json={"instances": [tokens]})
    if answer.status_code != 200:  # before the first part, the client gets this status; after it, a cut answer
        raise HandlerError(answer.status_code, f"the model server answered {answer.status_code}: {answer.text}")
    probabilities = answer.json()["predictions"][0]  # one output: a row of len(TOKENS) numbers
    best = max(range(PAD + 1, len(TOKENS)), key=probabilities.__getitem__)  # the padding is never a character
    return TOKENS[best]
