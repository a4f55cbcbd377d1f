"""Shipped defaults and the typed settings that load them."""

from mvtable.errors import SettingsError

from .settings import (
    ConnectorSettings,
    TableProperties,
    connector_settings,
    defaults,
    on_disk_name,
    parse_period,
    parse_size,
    property_strings,
)

__all__ = [
    "ConnectorSettings",
    "SettingsError",
    "TableProperties",
    "connector_settings",
    "defaults",
    "on_disk_name",
    "parse_period",
    "parse_size",
    "property_strings",
]
