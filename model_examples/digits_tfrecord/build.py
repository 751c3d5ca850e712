"""Export the digits classifier of ../digits_images (same training, same `image_bytes` signature).

    python model_examples/digits_tfrecord/build.py [EXPORT_DIR]    (default: model_examples/digits_tfrecord/export)

writes EXPORT_DIR/1/saved_model.pb. Only the handlers differ: this example reads tf.Example records.
"""

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("digits_images_build", HERE.parent / "digits_images" / "build.py")
digits_images = importlib.util.module_from_spec(spec)
spec.loader.exec_module(digits_images)

if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "export"
    print(f"exported {digits_images.main(target)}")
