"""The seed_job_parameters example has no model file: its script's model_fn builds a pure Python model. This
writes the empty export folder and the story's two inputs, 100,000 JSON lines {"value": n} each (1.5 MB).

    python model_examples/seed_job_parameters/build.py [EXPORT_DIR] [--lines N]

writes EXPORT_DIR/ (empty: `sagemaker-tfs package-model build EXPORT_DIR --code code` makes an archive of code/
only) and EXPORT_DIR/../batch_input/testdata1.jsonl and testdata2.jsonl.
"""

import argparse
from pathlib import Path

HERE = Path(__file__).resolve().parent
LINES = 100_000


def values(number: int, lines: int = LINES) -> list[int]:
    """The story's files start with 1, 3, 4, 15, 13 and end with 3000; testdata2 is testdata1 rotated."""
    first = [1, 3, 4, 15, 13] + [(i * 37) % 3001 for i in range(LINES - 6)] + [3000]
    chosen = first if number == 1 else first[5:] + first[:5]
    return chosen[:lines]


def write_inputs(folder: Path, lines: int = LINES) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for number in (1, 2):
        (folder / f"testdata{number}.jsonl").write_text("".join(f'{{"value":{v}}}\n' for v in values(number, lines)))
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("export_dir", nargs="?", type=Path, default=HERE / "export")
    parser.add_argument("--lines", type=int, default=LINES, help="lines per input file")
    args = parser.parse_args()
    args.export_dir.mkdir(parents=True, exist_ok=True)
    inputs = write_inputs(args.export_dir.parent / "batch_input", args.lines)
    print(f"wrote {args.export_dir}/ (no model file) and {inputs}/testdata1.jsonl, testdata2.jsonl")


if __name__ == "__main__":
    main()
