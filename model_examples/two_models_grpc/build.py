"""Export the models of ../two_models: an encoder and two versions of a classifier.

    python model_examples/two_models_grpc/build.py [EXPORT_DIR]    (default: model_examples/two_models_grpc/export)

Only the handler differs: this example calls the models over gRPC.
"""

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("two_models_build", HERE.parent / "two_models" / "build.py")
two_models = importlib.util.module_from_spec(spec)
spec.loader.exec_module(two_models)

if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "export"
    print(f"exported {two_models.main(target)}")
