"""Shipped defaults and the typed settings that load them."""

from .settings import ConnectorSettings, SettingsError, TableProperties, connector_settings, defaults, parse_period, parse_size

__all__ = [
    "ConnectorSettings",
    "SettingsError",
    "TableProperties",
    "connector_settings",
    "defaults",
    "parse_period",
    "parse_size",
]
