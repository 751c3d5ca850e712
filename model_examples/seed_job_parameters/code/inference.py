import json


class Model:
    warmup = False

    def predict(self, data):
        if not self.warmup:
            raise Exception("Model not warmed up")
        return ["🍣", "🍵"][data % 2]


def pre_model_fn(model_dir, context=None):
    print("pre_model_fn")
    print(model_dir, context)


def model_fn(model_dir, context=None):
    print("model_fn")
    print(model_dir, context)
    return Model()


def model_warmup_fn(model_dir, model, context=None):
    print("model_warmup_fn")
    print(model_dir, model, context)
    model.warmup = True


def input_fn(input_data, content_type, context=None):
    print("input_fn")
    print(input_data, content_type, context)
    return json.loads(input_data)


def predict_fn(input_data, model, context=None):
    print("predict_fn")
    print(input_data, model, context)
    return model.predict(input_data["value"])


def output_fn(prediction, accept, context=None):
    print("output_fn")
    print(prediction, accept, context)
    return json.dumps({"output": f"I want to {prediction}"}, ensure_ascii=False)
