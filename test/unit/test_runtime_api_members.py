"""runtime_api/members.py and its generated table: the table is the installed botocore's service model, and members
are checked by its constraints with SageMaker's ValidationError text."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest
from sagemaker_tfs.runtime_api import members, service_model
from sagemaker_tfs.runtime_api.errors import RuntimeApiError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import generate_runtime_members  # noqa: E402


def test_the_table_is_the_installed_botocore_s_service_model():
    """Every member the table checks is botocore's, with the same place and constraints (else the local checks are no
    longer SageMaker's). A member botocore added since is only reported: the API ignores headers it does not know,
    and a botocore release must not turn the suite red until the table is regenerated."""
    installed = generate_runtime_members.members()
    for operation, rows in service_model.MEMBERS.items():
        current = {row[0]: row for row in installed[operation]}
        assert [row for row in rows if current.get(row[0]) != row] == [], "run scripts/generate_runtime_members.py"
        added = sorted(current.keys() - {row[0] for row in rows})
        if added:
            warnings.warn(
                f"botocore's {operation} has members the table lacks: {added}; run scripts/generate_runtime_members.py",
                stacklevel=1,
            )


@pytest.mark.parametrize(
    "java, matches, refuses",
    [
        (r"\p{ASCII}*", ["", "tfs-model-name=m", "\x00\x7f"], ["\u00e9", "a\u20ac"]),
        (r"\A\S[\p{Print}]*\z", ["a", "a b~", "x" * 64], ["", " a", "a\n", "a\u00e9", "a\x7f"]),
        (r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*", ["a", "my-endpoint", "a--b"], ["my_endpoint", "-a", "a-", ""]),
        (r"^(?!.*\..*\.)[a-zA-Z0-9][a-zA-Z0-9-_\.]*$", ["a", "out-1_x.json"], ["a.b.c", ".a", "a/b"]),
        (r"^(NEW_SESSION)$|^[a-zA-Z0-9](-*[a-zA-Z0-9])*$", ["NEW_SESSION", "s-1"], ["NEW_SESSIONS", "s_1"]),
    ],
)
def test_java_patterns_mean_the_same_in_python(java, matches, refuses):
    regex = members.python_regex(java)
    assert [value for value in matches if not regex.fullmatch(value)] == []
    assert [value for value in refuses if regex.fullmatch(value)] == []


def test_every_pattern_of_the_table_translates():
    for rows in service_model.MEMBERS.values():
        for _name, *_, limits in rows:
            if "pattern" in limits:
                members.python_regex(limits["pattern"])  # re.error if a construct is not translated


def check(operation: str, endpoint: str = "e", **headers: str) -> str | None:
    try:
        members.check(operation, endpoint, headers.get)
    except RuntimeApiError as error:
        assert (error.status, error.code) == (400, "ValidationError")
        return error.message
    return None


def test_valid_members_pass():
    assert (
        check(
            "InvokeEndpoint",
            "my-endpoint-1",
            **{"Content-Type": "application/json", "Accept": "*/*", "X-Amzn-SageMaker-Inference-Id": "i" * 64},
        )
        is None
    )
    assert (
        check(
            "InvokeEndpointAsync",
            **{
                "X-Amzn-SageMaker-InputLocation": "/data/in.json",  # a local extension
                "X-Amzn-SageMaker-RequestTTLSeconds": "60",
            },
        )
        is None
    )


def test_each_broken_constraint_is_one_error_in_sagemaker_s_words():
    assert check("InvokeEndpoint", "e" * 64) == (
        f"1 validation error detected: Value '{'e' * 64}' at 'endpointName' failed to satisfy constraint: Member must "
        "have length less than or equal to 63"
    )
    assert check("InvokeEndpoint", "e_" * 32) == (
        f"2 validation errors detected: Value '{'e_' * 32}' at 'endpointName' failed to satisfy constraint: Member "
        f"must have length less than or equal to 63; Value '{'e_' * 32}' at 'endpointName' failed to satisfy "
        "constraint: Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9])*"
    )
    assert check("InvokeEndpoint", **{"X-Amzn-SageMaker-Target-Model": ""}) == (
        "1 validation error detected: Value '' at 'targetModel' failed to satisfy constraint: Member must have length "
        "greater than or equal to 1; Value '' at 'targetModel' failed to satisfy constraint: Member must satisfy "
        "regular expression pattern: \\A\\S[\\p{Print}]*\\z".replace("1 validation error", "2 validation errors")
    )
    assert check("InvokeEndpointAsync", **{"X-Amzn-SageMaker-InvocationTimeoutSeconds": "3601"}) == (
        "1 validation error detected: Value '3601' at 'invocationTimeoutSeconds' failed to satisfy constraint: Member "
        "must have value less than or equal to 3600"
    )


def test_a_sensitive_member_s_value_is_not_quoted():
    assert check("InvokeEndpoint", **{"X-Amzn-SageMaker-Custom-Attributes": "secret\u00e9"}) == (
        "1 validation error detected: Value at 'customAttributes' failed to satisfy constraint: Member must satisfy "
        "regular expression pattern: \\p{ASCII}*"
    )


def test_an_integer_member_is_ascii_digits_with_an_optional_sign():
    """Python's int() also reads blanks and '_' separators (fuzz/corpus/runtime_members/finding-integer-*)."""
    for value in ("3\t", " 60", "6_0", "1_000"):
        assert check("InvokeEndpointAsync", **{"X-Amzn-SageMaker-InvocationTimeoutSeconds": value}) == (
            f"1 validation error detected: Value '{value}' at 'invocationTimeoutSeconds' failed to satisfy constraint: "
            "Member must be an integer"
        )
    assert check("InvokeEndpointAsync", **{"X-Amzn-SageMaker-InvocationTimeoutSeconds": "+60"}) is None


def test_blank_classes_are_ascii_as_in_java_and_pcre():
    """\\S takes \\x1d, a blank to Python's Unicode \\s (fuzz/corpus/runtime_members/finding-non-ascii-blank-...)."""
    assert check("InvokeEndpoint", **{"X-Amzn-SageMaker-Inference-Id": "\x1d3601"}) is None
    assert check("InvokeEndpoint", **{"X-Amzn-SageMaker-Inference-Id": "\xa0"}) is None
    assert check("InvokeEndpoint", **{"X-Amzn-SageMaker-Inference-Id": "\t1"}) == (
        "1 validation error detected: Value '\t1' at 'inferenceId' failed to satisfy constraint: Member must satisfy "
        "regular expression pattern: \\A\\S[\\p{Print}]*\\z"
    )
