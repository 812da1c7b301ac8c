"""Field and check helpers the models and settings tables share: an endpoint's key and
timeout, and a model's "exactly one of two" check."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, SecretStr, ValidationError

from cairn.endpoint_settings import endpoint_key, endpoint_timeout
from cairn.model import CairnModel, exactly_one_of


class _Endpoint(BaseModel):
    key: SecretStr | None = endpoint_key("the key")
    timeout: float = endpoint_timeout(20, "seconds")
    quick_timeout: float = endpoint_timeout(2.0, "seconds", most=60)


class _Either(CairnModel):
    left: str | None = None
    right: int | None = None

    _one_side = exactly_one_of("left", "right", "give exactly one of 'left' or 'right'")


def test_an_endpoint_has_no_key_and_its_timeouts_by_default() -> None:
    made = _Endpoint()
    assert made.key is None
    assert (made.timeout, made.quick_timeout) == (20, 2.0)
    schema = _Endpoint.model_json_schema()["properties"]
    assert schema["timeout"]["description"] == "seconds"
    assert (schema["timeout"]["exclusiveMinimum"], schema["timeout"]["maximum"]) == (0, 600)
    assert schema["quick_timeout"]["maximum"] == 60


@pytest.mark.parametrize(
    "given", [{"timeout": 0}, {"timeout": 601}, {"quick_timeout": 61}, {"quick_timeout": -1}]
)
def test_an_endpoint_timeout_is_positive_and_bounded(given: dict[str, float]) -> None:
    with pytest.raises(ValidationError):
        _Endpoint.model_validate(given)


def test_exactly_one_of_takes_either_side() -> None:
    assert _Either(left="a").right is None
    assert _Either(right=1).left is None


@pytest.mark.parametrize("given", [{}, {"left": "a", "right": 1}])
def test_exactly_one_of_refuses_none_or_both_with_its_message(given: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match="give exactly one of 'left' or 'right'"):
        _Either.model_validate(given)
