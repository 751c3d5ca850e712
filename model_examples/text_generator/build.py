"""Train a tiny character-level language model on a few sentences, and export it for serving.

    python model_examples/text_generator/build.py [EXPORT_DIR]    (default: model_examples/text_generator/export)

writes EXPORT_DIR/1/saved_model.pb. Its serving_default signature takes `tokens` (int32 [None, CONTEXT]: the last
CONTEXT characters of a text as token ids, left-padded with PAD) and returns one output, `probabilities` (float32
[None, VOCAB]): the next character's, by token id. The token ids are the positions in code/vocabulary.json, which
code/inference.py reads too (the one source of truth; this script checks that it lists the corpus's characters).
The model learns CORPUS by heart, wrapping round from its end to its start, so greedy decoding (the likeliest
character each step) recites it. Training takes seconds on a CPU, with seed 0.
"""

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

CORPUS = (
    "the model writes one letter at a time, and each letter is sent as soon as it is made. "
    "the client reads the text while it grows, one line for each letter. "
    "a session keeps the text between two requests: the next request goes on where the last one stopped. "
    "small models learn short stories quickly, and a greedy reader always picks the likeliest letter. "
)
_VOCABULARY = json.loads((Path(__file__).resolve().parent / "code" / "vocabulary.json").read_text())
CONTEXT = _VOCABULARY["context"]  # characters the model sees
TOKENS = _VOCABULARY["tokens"]  # by token id; TOKENS[0] is the padding, never a character
PAD = 0
IDS = {character: token for token, character in enumerate(TOKENS) if token != PAD}
if sorted(IDS) != sorted(set(CORPUS)):
    raise SystemExit(f"code/vocabulary.json must list the corpus's characters after <pad>: {sorted(set(CORPUS))}")


def windows() -> tuple[np.ndarray, np.ndarray]:
    """Every CONTEXT-character window of the corpus (from its left-padded start, and across its end back to its
    start) as token ids, and the id of the character that follows each."""
    ids = [IDS[c] for c in CORPUS]
    padded = [PAD] * CONTEXT + ids  # a text shorter than CONTEXT arrives left-padded
    wrapped = ids + ids[:CONTEXT]  # after the corpus's last character comes its first
    contexts, targets = [], []
    for sequence in (padded, wrapped):
        for end in range(CONTEXT, len(sequence)):
            contexts.append(sequence[end - CONTEXT : end])
            targets.append(sequence[end])
    return np.array(contexts, np.int32), np.array(targets, np.int32)


def continuation(prompt: str, count: int) -> str:
    """What greedy decoding of a model that knows the corpus by heart writes after `prompt`, a piece of the corpus
    (its last CONTEXT characters must occur once in it): the corpus's next `count` characters, wrapping round."""
    tail = prompt[-CONTEXT:]
    loop = CORPUS * (2 + count // len(CORPUS))
    at = loop.index(tail) + len(tail)
    return loop[at : at + count]


def train() -> keras.Model:
    contexts, targets = windows()
    keras.utils.set_random_seed(0)
    tf.config.experimental.enable_op_determinism()
    model = keras.Sequential(
        [
            keras.Input((CONTEXT,), dtype="int32"),
            keras.layers.Embedding(len(TOKENS), 12),
            keras.layers.Flatten(),
            keras.layers.Dense(192, activation="relu"),
            keras.layers.Dense(len(TOKENS), activation="softmax"),
        ]
    )
    model.compile(keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(contexts, targets, epochs=30, batch_size=32, verbose=0)
    accuracy = float(np.mean(model.predict(contexts, verbose=0).argmax(axis=1) == targets))
    if accuracy < 1.0:
        raise SystemExit(f"the model recites only {accuracy:.1%} of the corpus: train it longer")
    return model


def main(export_dir: Path) -> Path:
    model = train()

    def serve(tokens):
        return {"probabilities": model(tokens)}

    # Keras 3 models must be exported with ExportArchive (see digits_images/build.py).
    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint("serving_default", serve, [tf.TensorSpec([None, CONTEXT], tf.int32, name="tokens")])
    version_dir = export_dir / "1"
    archive.write_out(str(version_dir), verbose=False)
    return version_dir


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "export"
    print(f"exported {main(target)}")
