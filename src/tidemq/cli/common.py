"""Options and helpers shared by subcommands."""

from __future__ import annotations

import logging

import click

from ..config import ConfigError, StoreConfig

root_option = click.option("--root", "root", default=None, envvar="TIDEMQ_ROOT_DIR",
                           help="store root directory (default ./data)")
config_option = click.option("--config", "config_file", default=None, type=click.Path(dir_okay=False),
                             envvar="TIDEMQ_CONFIG", help="TOML file with settings")


def load_store_config(root: str | None, config_file: str | None, **overrides) -> StoreConfig:
    if root is not None:
        overrides["root_dir"] = root
    try:
        return StoreConfig.load(toml_path=config_file, section="store", **overrides)
    except (ConfigError, OSError) as e:
        raise click.ClickException(str(e)) from e


def quiet_logs(verbose: bool = False) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
