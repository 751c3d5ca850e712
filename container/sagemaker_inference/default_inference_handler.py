"""`sagemaker_inference.default_inference_handler.DefaultInferenceHandler`: the defaults as methods, for scripts
that subclass or call them."""

from typing import Any

from sagemaker_tfs.toolkit import arrays, lifecycle


class DefaultInferenceHandler:
    def default_model_fn(self, model_dir: str, context: Any = None) -> Any:
        raise NotImplementedError(lifecycle.NO_MODEL_FN)

    def default_input_fn(self, input_data: Any, content_type: str, context: Any = None) -> Any:
        return arrays.decode(input_data, content_type)

    def default_predict_fn(self, data: Any, model: Any, context: Any = None) -> Any:
        predict = getattr(model, "predict", None)
        if not callable(predict):
            raise NotImplementedError(lifecycle.NO_PREDICT_FN)
        return predict(data)

    def default_output_fn(self, prediction: Any, accept: str, context: Any = None) -> Any:
        return arrays.default_output(prediction, accept)
