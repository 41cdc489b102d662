from __future__ import annotations

from pathlib import Path

import pytest

from lamarck.platform.settings import SettingsError, load_settings


def test_defaults_put_everything_under_the_data_dir() -> None:
    settings = load_settings()
    assert settings.mode == "embedded"
    assert settings.database_url == "sqlite:///.lamarck/lamarck.db"
    assert settings.models_dir == Path(".lamarck/models")
    assert settings.chroma_path == Path(".lamarck/chroma")
    assert settings.models.executor.model == "lamarck/smollm2-135m"


def test_precedence_is_arguments_then_environment_then_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "lamarck.toml").write_text(
        'data_dir = "from-toml"\nbroker_url = "redis://toml"\n'
        '[models.executor]\nmodel = "openai/toml-model"\napi_base = "http://toml/v1"\n'
        "[models.executor.sampling]\ntemperature = 0.3\n"
    )
    settings = load_settings()
    assert settings.data_dir == Path("from-toml")
    assert settings.mode == "distributed"
    assert settings.models.executor.model == "openai/toml-model"
    assert settings.models.executor.sampling.temperature == 0.3

    monkeypatch.setenv("LAMARCK_DATA_DIR", "from-env")
    monkeypatch.setenv("LAMARCK_MODELS__EXECUTOR__MODEL", "openai/env-model")
    settings = load_settings()
    assert settings.data_dir == Path("from-env")
    assert settings.models.executor.model == "openai/env-model"
    assert settings.models.executor.api_base == "http://toml/v1"
    assert settings.database_url == "sqlite:///from-env/lamarck.db"

    assert load_settings(data_dir=Path("from-args")).data_dir == Path("from-args")


def test_config_file_named_by_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "elsewhere.toml"
    path.write_text('database_url = "postgresql://127.0.0.1/x"\n')
    monkeypatch.setenv("LAMARCK_CONFIG", str(path))
    assert load_settings().database_url == "postgresql://127.0.0.1/x"
    monkeypatch.setenv("LAMARCK_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(SettingsError, match="does not exist"):
        load_settings()


def test_api_keys_are_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAMARCK_MODELS__CRITIC__API_KEY", "sk-very-secret")
    settings = load_settings()
    assert "sk-very-secret" not in repr(settings)
    assert settings.models.critic.api_key.get_secret_value() == "sk-very-secret"


@pytest.mark.parametrize(
    ("variable", "value", "names"),
    [
        ("LAMARCK_MODELS__EXECUTOR__SAMPLING__TEMPERATURE", "hot", "LAMARCK_MODELS__EXECUTOR__SAMPLING__TEMPERATURE"),
        ("LAMARCK_ENGINE__MAX_BATCH_SIZE", "0", "LAMARCK_ENGINE__MAX_BATCH_SIZE"),
        ("LAMARCK_SANDBOX__MODE", "yolo", "LAMARCK_SANDBOX__MODE"),
        ("LAMARCK_MODELS__EXECUTOR__MODEL", "  ", "LAMARCK_MODELS__EXECUTOR__MODEL"),
    ],
)
def test_malformed_settings_give_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, names: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert "\n" not in str(info.value) and names in str(info.value)


def test_malformed_toml_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "lamarck.toml").write_text("data_dir = \n")
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert "\n" not in str(info.value)


def test_unknown_toml_key_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "lamarck.toml").write_text('datadir = "typo"\n')
    with pytest.raises(SettingsError, match="datadir"):
        load_settings()
