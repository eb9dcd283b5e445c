"""An API token's patience (issue 20): stored with the token, set with the CLI or on the tokens page."""

from __future__ import annotations

import json

import pytest
from flask.testing import FlaskClient

from console_ha import cli
from console_ha.errors import InvalidSettingsChange
from console_ha.store.console_secrets import (
    DEFAULT_PATIENCE_SECONDS,
    MAX_PATIENCE_SECONDS,
    ConsoleSecrets,
)
from console_ha.store.datadir import DataDir

TOKENS_PAGE = "/settings/api-tokens"


def test_a_token_file_written_before_patience_existed_gets_the_default(data_dir: DataDir) -> None:
    secrets = ConsoleSecrets(data_dir)
    token = secrets.create_api_token("old program")
    stored = json.loads(secrets.api_tokens_path.read_text())
    for entry in stored["tokens"]:
        del entry["patience"]
    stored["tokens"].append({**stored["tokens"][0], "name": "hand edited", "patience": "soon"})
    secrets.api_tokens_path.write_text(json.dumps(stored))
    assert [t.patience for t in secrets.api_tokens()] == [DEFAULT_PATIENCE_SECONDS] * 2
    assert secrets.verify_api_token(token) is not None  # still lets its program in


@pytest.mark.parametrize("patience", [0, -1, MAX_PATIENCE_SECONDS + 1, 2.5, True, "ten", None])
def test_a_patience_out_of_bounds_is_refused_with_its_field(data_dir: DataDir, patience: object) -> None:
    secrets = ConsoleSecrets(data_dir)
    with pytest.raises(InvalidSettingsChange) as refused:
        secrets.create_api_token("program", patience=patience)  # type: ignore[arg-type]
    assert refused.value.code == "INVALID_CONFIG" and refused.value.detail["field"] == "patience"
    assert secrets.api_tokens() == []


def test_the_cli_makes_a_token_with_a_patience_and_lists_it(data_dir: DataDir,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["api-token", "create", "--name", "ha", "--patience", "5", "--data-dir", str(data_dir.root)]) == 0
    capsys.readouterr()
    assert [t.patience for t in ConsoleSecrets(data_dir).api_tokens()] == [5]
    assert cli.main(["api-token", "list", "--data-dir", str(data_dir.root)]) == 0
    assert "patience   5 s" in capsys.readouterr().out
    assert cli.main(["api-token", "create", "--name", "x", "--patience", "0", "--data-dir", str(data_dir.root)]) == 2
    assert len(ConsoleSecrets(data_dir).api_tokens()) == 1


def test_the_household_sets_a_token_s_patience_on_the_page(household: FlaskClient,
                                                           console_secrets: ConsoleSecrets) -> None:
    console_secrets.create_api_token("node-red")
    (token,) = console_secrets.api_tokens()
    page = household.get(TOKENS_PAGE).get_data(as_text=True)
    assert '<label for="patience-' in page and ">Patience</label>" in page
    assert f'value="{DEFAULT_PATIENCE_SECONDS}"' in page
    done = household.post(f"{TOKENS_PAGE}/{token.token_id}/patience", data={"patience": "8"})
    assert done.status_code == 303
    assert console_secrets.api_tokens()[0].patience == 8
    assert "waits up to 8 seconds" in household.get(TOKENS_PAGE).get_data(as_text=True)
    refused = household.post(f"{TOKENS_PAGE}/{token.token_id}/patience", data={"patience": "9999"})
    assert refused.status_code == 303 and console_secrets.api_tokens()[0].patience == 8
    assert "whole number of seconds" in household.get(TOKENS_PAGE).get_data(as_text=True)


def test_patience_changes_need_the_csrf_token_and_never_an_api_token(logged_in: FlaskClient, bearer: FlaskClient,
                                                                     console_secrets: ConsoleSecrets) -> None:
    (token,) = console_secrets.api_tokens()
    assert logged_in.post(f"{TOKENS_PAGE}/{token.token_id}/patience", data={"patience": "3"}).status_code == 400
    refused = bearer.post(f"{TOKENS_PAGE}/{token.token_id}/patience", data={"patience": "3"})
    assert refused.status_code == 403 and "FORBIDDEN" in refused.get_data(as_text=True)
    assert console_secrets.api_tokens()[0].patience == DEFAULT_PATIENCE_SECONDS


@pytest.mark.parametrize("typed", ["²", "9" * 5000, " 0x1 ", "1e2"])
def test_a_patience_typed_in_odd_digits_is_refused_not_a_crash(household: FlaskClient,
                                                              console_secrets: ConsoleSecrets, typed: str) -> None:
    # "²" is a digit to str.isdigit() but not to int(); 5,000 digits pass isdigit() and exceed int()'s limit.
    console_secrets.create_api_token("node-red")
    (token,) = console_secrets.api_tokens()
    refused = household.post(f"{TOKENS_PAGE}/{token.token_id}/patience", data={"patience": typed})
    assert refused.status_code == 303 and console_secrets.api_tokens()[0].patience == DEFAULT_PATIENCE_SECONDS
    assert "whole number of seconds" in household.get(TOKENS_PAGE).get_data(as_text=True)


def test_a_hand_edited_patience_in_odd_digits_does_not_lock_every_program_out(data_dir: DataDir) -> None:
    secrets = ConsoleSecrets(data_dir)
    token = secrets.create_api_token("old program")
    stored = json.loads(secrets.api_tokens_path.read_text())
    stored["tokens"][0]["patience"] = "²"
    secrets.api_tokens_path.write_text(json.dumps(stored))
    assert [t.patience for t in secrets.api_tokens()] == [DEFAULT_PATIENCE_SECONDS]
    assert secrets.verify_api_token(token) is not None
