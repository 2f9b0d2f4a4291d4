"""The I/O side of service configuration: split the command line, read the --config file, and
hand both, with the environment, to the pure `config.resolve` (config.py explains the keys,
the precedence and the messages)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from samsa.services.broker.broker_config import BrokerConfig
from samsa.services.controller.controller_config import ControllerConfig
from samsa.services.coordinator.coordinator_config import CoordinatorConfig
from samsa.services.runtime import config
from samsa.services.runtime.config import ConfigError, Setting

C = TypeVar("C")
SERVICE_CONFIGS: dict[str, type] = {
    "broker": BrokerConfig,
    "controller": ControllerConfig,
    "coordinator": CoordinatorConfig,
}


class _Record(argparse.Action):
    """Keeps the flag as the user wrote it (--listen or --listeners), for messages."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, Setting(str(values), "command line", option_string or ""))


def flag_parser(config_class: type, service: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"samsa.services.{service}",
        description="Every flag may also be set as a SAMSA_* variable or in the --config file "
        "(flags win over variables, variables over the file).",
    )
    parser.add_argument(
        "--config", metavar="FILE", help="a .properties file of key=value lines (Kafka's keys)"
    )
    for spec in config.keys_of(config_class):
        parser.add_argument(
            *spec.flags,
            dest=spec.name,
            action=_Record,
            default=None,
            help=f"{spec.name} / {spec.env_name}" + (f": {spec.help}" if spec.help else ""),
        )
    return parser


def load(
    config_class: type[C], service: str, argv: Sequence[str] | None, environ: Mapping[str, str]
) -> C:
    """The config of `service` from its flags, `environ` and the --config file; ConfigError
    (one line) on anything wrong. A malformed command line exits as argparse does."""
    namespace = flag_parser(config_class, service).parse_args(argv)
    flags = {
        name: setting for name, setting in vars(namespace).items() if isinstance(setting, Setting)
    }
    keys = config.keys_of(config_class)
    file: dict[str, Setting] = {}
    if namespace.config is not None:
        path = Path(namespace.config)
        try:
            content = path.read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigError(f"--config {path}: cannot read it ({error.strerror})") from None
        except UnicodeDecodeError as error:
            raise ConfigError(
                f"--config {path}: cannot read it (not UTF-8 text: byte {error.start})"
            ) from None
        file = config.parse_properties(content, path.name)
        config.check_file_keys(file, keys, service)
    others = frozenset(
        spec.name
        for other, other_class in SERVICE_CONFIGS.items()
        if other != service
        for spec in config.keys_of(other_class)
    )
    environment = config.environment_settings(environ, keys, service, others)
    return config.resolve(config_class, flags=flags, environment=environment, file=file)
