"""Which requests the direct route takes: one table for the fast test of the rule (a bare nginx with stand-in
upstreams, test/unit/test_direct_route_rule.py) and the full stacks' test (test/stack/test_stack_direct_route.py)."""

from __future__ import annotations

MODEL_SERVER = "model server"
APP = "app"
TFS = '{"instances": [1.0, 2.0, 5.0]}'


def nested(levels: int) -> str:
    """A TFS request holding `levels` objects in all, the outer one included."""
    return '{"instances": [' + '{"a": ' * (levels - 1) + "1.0" + "}" * (levels - 1) + "]}"


# (body, the route that takes it): the model server for one object that starts with a TFS key, nothing after it
BODIES = [
    (TFS, MODEL_SERVER),
    (' \r\n\t{"instances": [1.0]} \n', MODEL_SERVER),
    ('{"signature_name": "serving_default", "instances": [1.0]}', MODEL_SERVER),
    ('{"instances": [1.0], "signature_name": "ser\\"ving_}{default"}', MODEL_SERVER),
    ('{"inputs": {"x": [1.0]}}', MODEL_SERVER),
    ('{"examples": [{"x": 1.0}]}', MODEL_SERVER),
    ('{"instances": [{"b64": "aGVsbG8="}, {"b64": "d29ybGQ="}]}', MODEL_SERVER),
    ('{"instances": ["{", "}", "\\\\", "\\"{"]}', MODEL_SERVER),
    (nested(16), MODEL_SERVER),
    (nested(17), APP),  # deeper than the rule follows
    (nested(100_000), APP),
    ('{"instances": [1.0]}\n{"instances": [2.0]}', APP),
    ('{"instances": [1.0]} 2', APP),
    ('{"instances": [1.0]} {"instances": [2.0]}', APP),
    ('{"instances": [1.0]},{"instances": [2.0]}', APP),
    ('{"instances": [1.0]}}', APP),
    ('{"instances": [1.0]', APP),
    ('{"instances": ["}"]', APP),
    ('{"instances": ["\\"]}', APP),
    ('{"x": 1.0}', APP),
    ('{"y": 1, "instances": [1.0]}', APP),  # when in doubt: a TFS key comes first
    ('{"\\u0069nstances": [1.0]}', APP),
    ("[1.0, 2.0]", APP),
    ('[{"instances": [1.0]}]', APP),
    ("", APP),
    (("\ufeff" + TFS).encode(), APP),
]

ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"
DEFAULT = "/v1/models/half_plus_three:predict"
# (custom attributes, the model server path the route calls, or APP)
ATTRIBUTE_FORMS = [
    ("", DEFAULT),
    ("trace=abc", DEFAULT),
    ("a=1,b=2", DEFAULT),
    ("tfs-model-name=half_plus_two", "/v1/models/half_plus_two:predict"),
    ("tfs-model-name=half_plus_two,tfs-model-version=124", "/v1/models/half_plus_two/versions/124:predict"),
    ("tfs-model-version=123", "/v1/models/half_plus_three/versions/123:predict"),
    ("tfs-method=regress,tfs-model-name=half_plus_two", "/v1/models/half_plus_two:regress"),
    ("tfs-method=classify", "/v1/models/half_plus_three:classify"),
    ("tfs-method=predict", DEFAULT),
    ("trace=1,tfs-model-name=m.v-2_x,other=ok", "/v1/models/m.v-2_x:predict"),
    ("tfs-model-version=007", "/v1/models/half_plus_three/versions/007:predict"),
    ("tfs-model-version=123456789012345678", "/v1/models/half_plus_three/versions/123456789012345678:predict"),
    ("tfs-model-version=1234567890123456789", APP),  # 19 digits: the app checks the int64 bound
    ("tfs-model-name=" + "m" * 255, "/v1/models/" + "m" * 255 + ":predict"),
    ("tfs-model-name=" + "m" * 256, APP),
    ("tfs-model-name=a..b", APP),
    ("tfs-model-name=../etc", APP),
    ("tfs-model-name=a/b", APP),
    ("tfs-model-name=a%2Fb", APP),
    ("tfs-model-name=.hidden", APP),
    ("tfs-model-name=", APP),
    ("tfs-model-name=a b", APP),
    ("tfs-model-name=a,tfs-model-name=b", APP),
    ("tfs-model-version=1,tfs-model-version=2", APP),
    ("tfs-method=predict,tfs-method=regress", APP),
    ("tfs-model-version=-1", APP),
    ("tfs-model-version=1.0", APP),
    ("tfs-method=explain", APP),
    ("tfs-method=Predict", APP),
    ("TFS-MODEL-NAME=half_plus_two", APP),
    ("tfs-model-names=x", APP),
    ("tfs-other=x", APP),
    ("xtfs-model-name=half_plus_two", APP),
    ("tfs-model-name=half_plus_two, tfs-method=regress", APP),
    (" tfs-model-name=half_plus_two ", "/v1/models/half_plus_two:predict"),  # HTTP trims a value's ends
    ("tfs-model-name=tfs-method=regress", APP),
    ("note=a b", APP),
]
