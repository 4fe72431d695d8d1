"""One typed, frozen configuration per component, checked in one place.

Every field carries its unit in its name (qualifier last: ``segment_size_bytes``,
``send_hold_ms_max``), its default, its bounds and a doc string (in the field
metadata). Sources, weakest first: defaults, a TOML file (one ``[section]`` per
component: ``[store]``, ``[broker]``, ``[replication]``), ``TIDEMQ_*`` environment variables,
explicit keyword overrides (a command's flags); nothing else in the code base reads the
environment. docs/configuration.md is generated from these classes (scripts/config-docs).

Mistakes are errors (ConfigError, one line, with "did you mean" where a name is
close to a known one), never silently ignored or bent: an unknown section, setting
or ``TIDEMQ_*`` variable; a value of the wrong type (``0.85`` for a whole number is
refused, never truncated; a ``*_percent`` setting says "85 means 85 %"); a value
outside its bounds (Kafka's ConfigDef does the same). Settings renamed since are
still read under their old names, with a deprecation warning (``RENAMED``).

    cfg = StoreConfig.load(toml_path="tidemq.toml", section="store", root_dir="/var/lib/tidemq")
"""

from __future__ import annotations

from .broker import BrokerConfig
from .client import ClientConfig
from .loading import (ENV_NOT_SETTINGS, ENV_PREFIX, GIB, KIB, MIB, SECTIONS, ConfigError, accel_wanted, check_env,
                      did_you_mean, is_loopback, toml_settings)
from .replication import ReplicationConfig
from .store import StoreConfig

__all__ = ["ENV_NOT_SETTINGS", "ENV_PREFIX", "GIB", "KIB", "MIB", "SECTIONS", "BrokerConfig", "ClientConfig",
           "ConfigError", "ReplicationConfig", "StoreConfig", "accel_wanted", "check_env", "did_you_mean",
           "is_loopback", "toml_settings"]

for _c in (StoreConfig, BrokerConfig, ReplicationConfig, ClientConfig):
    SECTIONS[_c.SECTION] = _c
