"""Where things are: the repository, the virtual environment's commands, the TensorFlow Serving project's
reference models."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
TESTDATA = REPO / "test" / "data" / "tfs-reference-models"  # from the TensorFlow Serving project (README there)

# Reference SavedModels from the TensorFlow Serving project (a copy of its test data, see test/data/README.md).
HALF_PLUS_TWO = TESTDATA / "saved_model_half_plus_two_cpu"  # TF1, version 123
HALF_PLUS_THREE = TESTDATA / "saved_model_half_plus_three"  # TF1, version 123, tf.saved_model.load fails on it
HALF_PLUS_TWO_2_VERSIONS = TESTDATA / "saved_model_half_plus_two_2_versions"  # TF1, versions 123 and 124
HALF_PLUS_TWO_TF2 = TESTDATA / "saved_model_half_plus_two_tf2_cpu"  # TF2, version 123
BAD_HALF_PLUS_TWO = TESTDATA / "bad_half_plus_two"  # no saved_model.pb: must fail to load
# TensorFlow Lite half_plus_two, version 123: tensors x -> y; the second stores a SignatureDef (x -> y naming the
# tensor `tflite_input:0`) in its signature_defs_metadata
HALF_PLUS_TWO_TFLITE = TESTDATA / "saved_model_half_plus_two_tflite"
HALF_PLUS_TWO_TFLITE_WITH_SIGDEF = TESTDATA / "saved_model_half_plus_two_tflite_with_sigdef"
# The prefix of each test process's own folder for the defaults that follow $XDG_RUNTIME_DIR (test/conftest.py)
TEST_RUNTIME_PREFIX = "sagemaker-tfs-tests-"
