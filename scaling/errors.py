"""The package's own exception: a bad input named before any compute."""


class ConfigError(ValueError):
    """A config value that cannot be used; the message names key, value and what is accepted."""


def need(ok: bool, key: str, value: object, accepted: str) -> None:
    """Raise ConfigError naming `key`, the bad `value` and what is `accepted`, unless `ok`."""
    if not ok:
        raise ConfigError(f"{key}: got {value!r}, expected {accepted}")
