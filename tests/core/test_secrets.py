"""The redactor: the keys in use in every encoding, key shapes, placeholders left alone, and the sinks it guards
(files written through shambench.io, journal lines, the response cache, the CLI's terminal streams)."""

from __future__ import annotations

import ast
import base64
import json
import os
from pathlib import Path
from unittest import mock
from urllib.parse import quote, quote_plus

import orjson
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from shambench import secrets
from shambench.io import Journal, write_atomic
from shambench.secrets import MASK, redact, remember_key_env
from tests import leaks

KEY = "k3y-Value/with+odd=chars&é"


@pytest.fixture
def key_in_env(monkeypatch):
    monkeypatch.setenv("SHAMBENCH_TEST_KEY", KEY)
    monkeypatch.setattr(secrets, "_key_envs", secrets._key_envs)  # restored after the test
    remember_key_env("SHAMBENCH_TEST_KEY")
    return KEY


@pytest.mark.parametrize(
    "form",
    [
        KEY,
        json.dumps(KEY)[1:-1],
        json.dumps(KEY, ensure_ascii=False)[1:-1],
        quote(KEY, safe=""),
        quote_plus(KEY),
        base64.b64encode(KEY.encode()).decode().rstrip("="),
        base64.urlsafe_b64encode(KEY.encode()).decode().rstrip("="),
    ],
)
def test_a_key_in_use_is_masked_in_every_encoding(key_in_env, form):
    assert redact(f"the server said: {form}!") == f"the server said: {MASK}!"


# Keys with what escaping changes: quotes, backslashes, slashes, control characters, URL-reserved and non-ASCII
# characters (no NUL, which no environment variable holds, and no lone surrogate).
SPECIALS = st.sampled_from(list("\"\\/'\t\n\x01\x1f\x7f +=&<>%é€\u2028😀"))
KEYS = st.text(
    alphabet=SPECIALS | st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=8,
    max_size=24,
)


@settings(max_examples=60, deadline=None)
@given(key=KEYS)
def test_no_encoding_of_a_key_in_use_survives_redaction(key):
    forms = {name: form for name, form in leaks.encodings(key).items() if len(form) >= secrets.MIN_SECRET_CHARS}
    in_use = (*secrets._key_envs, "SHAMBENCH_TEST_KEY")
    with mock.patch.dict(os.environ, {"SHAMBENCH_TEST_KEY": key}), mock.patch.object(secrets, "_key_envs", in_use):
        for name, form in forms.items():
            redacted = redact(f"said: {form}.")
            assert MASK in redacted, name
            assert [other for other, kept in forms.items() if kept in redacted] == [], name


def test_an_echoed_reply_stored_as_json_keeps_no_encoding_of_the_key(monkeypatch):
    # C02 of the attacks: the key as a span and inside a span's JSON, the reply then written as a JSON string.
    monkeypatch.setenv("SHAMBENCH_TEST_KEY", leaks.ODD_KEY)
    monkeypatch.setattr(secrets, "_key_envs", (*secrets._key_envs, "SHAMBENCH_TEST_KEY"))
    content = json.dumps({"incorrect_spans": leaks.echo_spans(f"Bearer {leaks.ODD_KEY}", leaks.ODD_KEY)})
    written = [redact(json.dumps({"raw": content})), redact(orjson.dumps({"raw": content}).decode())]
    written.append(redact(repr(json.loads(content)["incorrect_spans"])))  # as `show` prints unplaced spans
    assert leaks.leaks(leaks.ODD_KEY, [], written) == []
    assert json.loads(json.loads(written[0])["raw"])["incorrect_spans"][:2] == [
        f"Bearer {MASK}",
        '{"auth": "Bearer ***"}',
    ]


def test_a_key_is_matched_by_one_expression_built_once_per_set_of_keys(key_in_env):
    first = secrets._matcher()
    assert first is not None and secrets._matcher() is first
    assert "k3y-" in first[0]  # the key's opening, searched for before the expression runs


def test_a_key_variable_read_later_is_still_known(monkeypatch):
    monkeypatch.setattr(secrets, "_key_envs", secrets._key_envs)
    remember_key_env("SHAMBENCH_TEST_LATE_KEY")
    assert redact("x late-secret-1234 y") == "x late-secret-1234 y"
    monkeypatch.setenv("SHAMBENCH_TEST_LATE_KEY", "late-secret-1234")
    assert redact("x late-secret-1234 y") == f"x {MASK} y"


def test_a_key_variable_changed_or_unset_later_is_followed(monkeypatch):
    # The redactor compares the variables' stored values on every call: a change made any way os.environ offers
    # (setting, deleting, os.environb) is seen at the next call.
    monkeypatch.setattr(secrets, "_key_envs", secrets._key_envs)
    remember_key_env("SHAMBENCH_TEST_MOVING_KEY")
    monkeypatch.setenv("SHAMBENCH_TEST_MOVING_KEY", "first-secret-1234")
    assert redact("a first-secret-1234 b second-secret-5678") == f"a {MASK} b second-secret-5678"
    os.environb[b"SHAMBENCH_TEST_MOVING_KEY"] = b"second-secret-5678"
    assert redact("a first-secret-1234 b second-secret-5678") == f"a first-secret-1234 b {MASK}"
    del os.environ["SHAMBENCH_TEST_MOVING_KEY"]
    assert redact("a first-secret-1234 b second-secret-5678") == "a first-secret-1234 b second-secret-5678"


def test_an_environment_mapping_of_another_kind_is_read_by_its_get(monkeypatch):
    # e.g. os.environ replaced by a plain dict: no stored mapping to read, its `get` is the one way
    monkeypatch.setattr(secrets, "_key_envs", secrets._key_envs)
    remember_key_env("SHAMBENCH_TEST_DICT_KEY")
    monkeypatch.setattr(os, "environ", {"SHAMBENCH_TEST_DICT_KEY": "dict-secret-1234"})
    assert redact("x dict-secret-1234 y") == f"x {MASK} y"


FRAGMENTS = st.sampled_from(
    ["sk-", "hf_", "gh", "ghp_", "gho_", "ghr_", "github_pat_", "AKIA", "AIza", "Bearer ", "://", "@", "/", " ", "x"]
)
SHAPED_TEXTS = st.lists(FRAGMENTS | st.text(alphabet="aZ09_-.:/@ \n", max_size=20), max_size=12).map("".join)


@given(SHAPED_TEXTS)
def test_a_text_the_shapes_match_is_never_passed_over(text):
    assert secrets.KEY_SHAPES.search(text) is None or secrets.may_hold_shape(text)


@settings(max_examples=60, deadline=None)
@given(key=KEYS, pieces=st.lists(st.sampled_from(["", " ", "x", "\\", '"', "%2"]) | KEYS, max_size=6))
def test_a_form_is_found_exactly_where_the_expression_finds_one(key, pieces):
    # Pieces of the key's forms (their openings without the rest, and whole) around other text: the search at
    # the openings answers as a scan of the whole text by the expression does.
    forms = sorted(leaks.encodings(key).values())
    text = "".join(forms[len(p) % len(forms)][: len(p) + 4] + p for p in pieces) + forms[len(pieces) % len(forms)]
    in_use = (*secrets._key_envs, "SHAMBENCH_TEST_KEY")
    with mock.patch.dict(os.environ, {"SHAMBENCH_TEST_KEY": key}), mock.patch.object(secrets, "_key_envs", in_use):
        matcher = secrets._matcher()
        assert matcher is not None
        assert secrets._holds_form(text, matcher) == (matcher[1].search(text) is not None)
        assert secrets._holds_form(text[:-1], matcher) == (matcher[1].search(text[:-1]) is not None)


# Every class field in the packages that names a key variable, found in the source (so a module only an extra
# imports is read too): (file, class, field, annotation).
ROOT = Path(__file__).parents[2]
PACKAGES = ("shambench", "detectors", "adapters", "leaderboard")


def key_variable_fields() -> list[tuple[str, str, str, str]]:
    found = []
    for path in sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py")):
        for cls in (n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)):
            for stmt in cls.body:
                named = isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                if named and stmt.target.id.endswith("key_env"):
                    rel = path.relative_to(ROOT).as_posix()
                    found.append((rel, cls.name, stmt.target.id, ast.unparse(stmt.annotation)))
    return found


def test_every_model_field_naming_a_key_variable_tells_the_redactor():
    """A model naming a key variable registers it when built, in whichever process builds it (C13 of the attacks: a
    sweep's driver builds its cells' specs and writes what the workers' requests brought back, but never reads the
    key); the options TypedDicts are only ever passed on into such a model."""
    fields = key_variable_fields()
    typed_dicts = {"EvalOptions", "EndpointOptions"}
    unmarked = [f for f in fields if f[1] not in typed_dicts and "NAMES_A_KEY" not in f[3]]
    assert unmarked == []
    assert {(f[1], f[2]) for f in fields} >= {("RunSpec", "api_key_env"), ("Endpoint", "api_key_env")}


def test_building_a_model_that_names_a_key_variable_makes_its_value_a_secret(monkeypatch):
    from shambench.llm.endpoint import Endpoint
    from shambench.runs.spec import RunSpec

    for build, name in ((lambda n: RunSpec(detector="openai", api_key_env=n), "SB_SPEC_KEY"),
                        (lambda n: Endpoint(model="m", api_key_env=n), "SB_ENDPOINT_KEY")):  # fmt: skip
        monkeypatch.setattr(secrets, "_key_envs", secrets.KEY_ENVS)
        monkeypatch.setenv(name, "plain-value-of-no-shape")
        assert redact("said plain-value-of-no-shape") == "said plain-value-of-no-shape"
        build(name)
        assert redact("said plain-value-of-no-shape") == f"said {MASK}", name


def test_a_sweep_plan_makes_the_key_given_to_its_cells_a_secret(monkeypatch, tmp_path):
    from shambench.runs.sweep.grid import plan_sweep

    monkeypatch.setattr(secrets, "_key_envs", secrets.KEY_ENVS)
    monkeypatch.setenv("SB_SWEEP_KEY", "sweep-value-of-no-shape")
    row = {"id": "a/1", "dataset": "a", "task": "qa", "response": "x y", "hallu_spans": []}
    (tmp_path / "e.jsonl").write_text(json.dumps(row) + "\n")
    (tmp_path / "s.yaml").write_text("examples: [e.jsonl]\ndetectors:\n  - detector: openai\n    params: {model: m}\n")
    plan_sweep(tmp_path / "s.yaml", endpoint={"api_key_env": "SB_SWEEP_KEY", "base_url": "http://127.0.0.1:9/v1"})
    assert redact("x sweep-value-of-no-shape") == f"x {MASK}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("bad key sk-abc***xyz given", "bad key sk-*** given"),  # a key a server echoed masked
        ("use sk-proj-A1b2C3d4E5f6G7h8I9 now", "use sk-*** now"),
        ("token hf_abcdefghijklmnopqrstuvwxyz0123", "token hf_***"),
        ("gh ghp_abcdefghijklmnopqrstuvwxyz0123456789", "gh ghp_***"),
        ("aws AKIAIOSFODNN7EXAMPLE.", "aws AKIA***."),
        ("Authorization: Bearer abc123def456ghi789jkl", "Authorization: Bearer ***"),
        # a URL's user information, whoever's: user and password, a token alone, any scheme, any case
        ("base_url=http://alice:hunter2@127.0.0.1:8000/v1;", "base_url=http://***@127.0.0.1:8000/v1;"),
        (
            "see HTTPS://tok3n@api.example.com/v1 and git+ssh://git@host/x",
            "see HTTPS://***@api.example.com/v1 and git+ssh://***@host/x",
        ),
        # prose and placeholders are no keys
        ("pip install sk-learn, risk-free", "pip install sk-learn, risk-free"),
        ("the Bearer instruments and bearer bonds", "the Bearer instruments and bearer bonds"),
        ("EMPTY key, expected text", "EMPTY key, expected text"),
        # an `@` in a URL's path or query, or in a mail address, is no user information
        ("http://host/a@b?to=x@y mail a@b.org", "http://host/a@b?to=x@y mail a@b.org"),
    ],
)
def test_key_shapes(text, expected):
    assert redact(text) == expected


def test_short_values_are_placeholders_not_secrets(monkeypatch):
    monkeypatch.setattr(secrets, "_key_envs", secrets._key_envs)
    monkeypatch.setenv("SHAMBENCH_TEST_SHORT", "x")
    remember_key_env("SHAMBENCH_TEST_SHORT")
    assert redact("expected a JSON object") == "expected a JSON object"


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60))
def test_text_without_keys_is_unchanged(text):
    # No key variable is set to anything in this text, and hypothesis' text is too short and too random to hold
    # a key shape (16 key characters after a prefix) by chance, barring the prefixes themselves, excluded here.
    matcher = secrets._matcher()
    if secrets.may_hold_shape(text) or (matcher and matcher[1].search(text)):
        return
    assert redact(text) == text


def test_files_and_journal_lines_are_written_redacted(key_in_env, tmp_path):
    write_atomic(tmp_path / "f.json", json.dumps({"raw": f"echo: Bearer {KEY}"}))
    assert KEY not in (tmp_path / "f.json").read_text(encoding="utf-8")
    journal = Journal(tmp_path / "j.jsonl")
    with journal.appender() as append:
        append(json.dumps({"id": "a", "raw": KEY}) + "\n")
    assert (tmp_path / "j.jsonl").read_text(encoding="utf-8") == json.dumps({"id": "a", "raw": MASK}) + "\n"


def test_the_response_cache_stores_a_reply_redacted(key_in_env, tmp_path):
    from shambench.llm.cache import ResponseCache

    cache = ResponseCache(tmp_path / "c.sqlite")
    cache.put("k", "m", {"text": f"your key is {KEY}"})
    cache.close()
    assert ResponseCache(tmp_path / "c.sqlite").get("k") == {"text": f"your key is {MASK}"}


def test_the_cli_terminal_is_redacted(key_in_env):
    import click

    from shambench.cli import LazyGroup
    from shambench.cli.exits import UserError

    @click.group(cls=LazyGroup)
    def group() -> None:
        pass

    @group.command()
    def leak() -> None:
        click.echo(f"out {KEY}")
        click.echo(f"err {KEY}", err=True)

    @group.command()
    def fail() -> None:
        raise UserError(f"bad {KEY}")  # shown by click once the command has ended

    result = CliRunner().invoke(group, ["leak"])
    assert result.exit_code == 0
    assert (result.stdout, result.stderr) == (f"out {MASK}\n", f"err {MASK}\n")
    failed = CliRunner().invoke(group, ["fail"])
    assert (failed.exit_code, failed.stderr) == (2, f"error: bad {MASK}\n")
