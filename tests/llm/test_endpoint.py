"""One endpoint builder (`endpoint_of`): every API-backed detector's endpoint is the one its options describe."""

from __future__ import annotations

import pytest

from shambench.detection.detector import create_detector, detectors
from shambench.errors import DataError, EndpointError, ParameterError
from shambench.llm.api import APIDetector
from shambench.llm.endpoint import DEFAULT_KEY_ENV, Endpoint, EndpointOptions, endpoint_of, takes_endpoint_options
from shambench.registry import factory_parameters
from tests.detectors.test_miprov2 import program_file, save

OPTIONS = {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "MY_KEY", "max_concurrency": 3, "timeout": 7}
# What a detector needs beyond the endpoint options before it can be made at all.
NEEDS = {"prm": {"format": "math-shepherd"}}
# The families that ask a model over an OpenAI-compatible API: each must be found among the detectors below.
API_FAMILIES = {"prompted", "critic", "prm", "sentence-verifier", "generative-tagger"}


def test_the_options_given_are_taken_and_the_others_are_the_endpoints_defaults():
    built = endpoint_of(
        "m",
        base_url="http://127.0.0.1:8000/v1",
        api_key_env="MY_KEY",
        max_concurrency=3,
        timeout=7.5,
        max_retries=2,
        backoff_base=0.5,
    )
    assert (built.model, built.base_url, built.api_key_env) == ("m", "http://127.0.0.1:8000/v1", "MY_KEY")
    assert (built.max_concurrency, built.timeout, built.max_retries, built.backoff_base) == (3, 7.5, 2, 0.5)
    assert endpoint_of("m") == endpoint_of("m", base_url="", api_key_env="", timeout=None) == Endpoint(model="m")
    assert endpoint_of("m").api_key_env == DEFAULT_KEY_ENV and endpoint_of("m").base_url is None


@pytest.mark.parametrize("url", ["http://user:secret@127.0.0.1:8000/v1", "ftp://127.0.0.1/v1", "127.0.0.1:8000"])
def test_a_base_url_with_credentials_or_not_http_is_refused_as_such(url):
    with pytest.raises(EndpointError) as refused:
        endpoint_of("m", base_url=url)
    assert "secret" not in str(refused.value)


def api_detectors(tmp_path) -> dict[str, str]:
    """Every registered detector that can be made API-backed, by the spec that makes it, with its family (a
    program file for miprov2; the presets' own programs are not made on this machine: a DataError says so)."""
    program = save(tmp_path / "program.json", program_file())
    found = {}
    for entry in detectors.entries():
        spec = f"{entry.name}:{program}" if entry.name == "miprov2" else entry.name
        try:
            made = create_detector(spec, model="m", **NEEDS.get(entry.name, {}), **OPTIONS)
        except (ParameterError, DataError):
            continue  # a factory that takes no endpoint options (a local model), or a missing program file
        if isinstance(made, APIDetector):
            found[spec] = made.family
    return found


def test_every_api_detector_takes_its_endpoint_from_its_options(tmp_path):
    found = api_detectors(tmp_path)
    assert set(found.values()) >= API_FAMILIES, found
    for spec in found:
        needs = NEEDS.get(spec.partition(":")[0], {})
        made = create_detector(spec, model="m", **needs, **OPTIONS)
        assert isinstance(made, APIDetector)
        expected = endpoint_of(made.endpoint.model, **OPTIONS)  # type: ignore[arg-type]
        assert made.endpoint == expected, spec
        with pytest.raises(EndpointError):
            create_detector(spec, model="m", **needs, **{**OPTIONS, "base_url": "http://u:p@127.0.0.1:9/v1"})


def test_a_callers_defaults_stand_where_an_option_is_not_given():
    defaults: EndpointOptions = {"base_url": "http://127.0.0.1:8000/v1", "max_concurrency": 4, "timeout": 30}
    built = endpoint_of("m", defaults, max_concurrency=2, timeout=None, api_key_env="")
    assert (built.base_url, built.max_concurrency, built.timeout) == ("http://127.0.0.1:8000/v1", 2, 30)
    assert built.api_key_env == DEFAULT_KEY_ENV and built.max_retries == Endpoint(model="m").max_retries


def test_a_factory_takes_the_options_as_its_own_keywords_documented_by_the_endpoint():
    seen = []

    @takes_endpoint_options
    def factory(model: str = "m", *, endpoint: EndpointOptions, **more: int) -> int:
        """Makes one.

        Args:
            model: the model.
        """
        seen.append((model, endpoint, more))
        return 1

    assert factory("x", timeout=3, base_url=None, extra=2) == 1
    assert seen == [("x", {"timeout": 3, "base_url": None}, {"extra": 2})]
    params, more = factory_parameters(factory)
    assert more and [p.name for p in params] == ["model", *EndpointOptions.__annotations__]
    shown = {p.name: (p.type, p.default, p.help) for p in params}
    assert shown["model"] == ("str", "'m'", "the model.")
    assert shown["timeout"] == ("float | None", "None", "Seconds before one request is abandoned (and retried).")


def test_every_factory_that_takes_a_base_url_takes_and_documents_every_endpoint_option():
    taking = 0
    for entry in detectors.entries():
        params = {p.name: p for p in factory_parameters(entry.factory)[0]}
        if "base_url" not in params:
            continue
        taking += 1
        for name in EndpointOptions.__annotations__:
            assert name in params and params[name].help, (entry.name, name)
    assert taking >= len(API_FAMILIES)
