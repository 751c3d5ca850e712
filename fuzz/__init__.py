"""Coverage-guided fuzzing of the parsers that read untrusted bytes (docs/operations.md, "Fuzzing").

Each module of `fuzz.targets` is one harness:
- `MODULES`: the modules it aims at (instrumented for atheris, measured for coverage);
- `one_input(data: bytes) -> None`: the oracle. It returns for an input the parser handled as documented (an
  answer, or one of its own errors with the client's status) and raises anything else, a finding;
- optional `MAX_LEN` (the longest input a campaign tries, bytes; default 4096) and `TIMEOUT_S` (an input slower
  than that is a finding; default 10).

The harnesses take plain bytes and never import atheris, so that the test suite replays every corpus
(`fuzz/corpus/<target>/`, test/fuzz/test_corpus_replay.py) without it.
"""
