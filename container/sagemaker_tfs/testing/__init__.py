"""Tests of a model folder and its code/inference.py, served as `serve` serves it (docs/testing.md):

    from sagemaker_tfs.testing import Endpoint

    with Endpoint("model") as endpoint:
        result = endpoint.invoke('{"instances": [1.0, 2.0]}')
        assert result.status == 200 and result.json() == {"predictions": [3.5, 4.0]}

The pytest plugin (installed with the package) adds the `sagemaker_endpoint` fixture: endpoints closed after the
test, the model servers stopped at the end of the session.
"""

from .endpoint import Endpoint, Result
from .model_servers import stop_all

__all__ = ["Endpoint", "Result", "stop_all"]
