"""Local Batch Transform: a SageMaker transform job on one machine, with SageMaker's semantics.

    from sagemaker_tfs.transform import transform
    description = transform("model.tar.gz", data="in/", output_path="out/", content_type="application/jsonlines",
                            split_type="Line", strategy="MultiRecord", assemble_with="Line")
    description["TransformJobStatus"]  # "Completed" or "Failed"

Modules, in the order data flows: job (parameters, validation, CreateTransformJob request), shared/storage.py
(inputs and outputs, local or s3://), records (SplitType), batch_strategy (BatchStrategy, MaxPayloadInMB),
dataprocessing (filters, joins, assembly), jsonpath, client (POST /invocations), containers (the stacks of our
container), pipeline (the threads), api (transform(), the job description), progress and cli (the
`sagemaker-tfs transform` command).
"""

from .api import LocalOptions, TransformJobStopped, run, transform
from .job import TransformJob, ValidationError

__all__ = ["transform", "run", "LocalOptions", "TransformJob", "TransformJobStopped", "ValidationError"]
