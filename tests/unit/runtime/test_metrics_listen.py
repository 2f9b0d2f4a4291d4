"""Goal: the metrics address parses as HOST:PORT, :PORT or PORT, is off when empty, and anything
else is refused with a message saying what to write."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from samsa.services.broker.broker_config import BrokerConfig
from samsa.services.runtime import config_loading, metrics
from samsa.services.runtime.metrics import (
    ENV_LISTEN,
    MetricsConfigError,
    MetricsEndpoint,
    endpoint_from,
    parse_listen,
)


@pytest.mark.parametrize(
    ("text", "endpoint"),
    [
        ("127.0.0.1:9464", MetricsEndpoint("127.0.0.1", 9464)),
        (":9464", MetricsEndpoint("0.0.0.0", 9464)),
        ("9464", MetricsEndpoint("0.0.0.0", 9464)),
        ("[::1]:0", MetricsEndpoint("::1", 0)),  # the brackets are the address's, not the host's
        ("[::]:9464", MetricsEndpoint("::", 9464)),
        ("", None),
        (None, None),
    ],
)
def test_addresses_parse(text: str | None, endpoint: MetricsEndpoint | None) -> None:
    assert parse_listen(text) == endpoint


@pytest.mark.parametrize("text", ["host", "host:", "h:70000", "h:-1", "h:port"])
def test_malformed_addresses_are_refused_saying_what_to_write(text: str) -> None:
    with pytest.raises(MetricsConfigError, match="use HOST:PORT, :PORT or PORT"):
        parse_listen(text)


def test_the_flag_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_LISTEN, "127.0.0.1:1")
    assert endpoint_from("127.0.0.1:2") == MetricsEndpoint("127.0.0.1", 2)
    assert endpoint_from(None) == MetricsEndpoint("127.0.0.1", 1)
    monkeypatch.delenv(ENV_LISTEN)
    assert endpoint_from(None) is None


def test_a_service_whose_flag_turned_metrics_off_serves_none_whatever_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--metrics-listen ""` resolves metrics.listen to off (flags win over SAMSA_* variables),
    but serve() read SAMSA_METRICS_LISTEN again when handed that None, and served metrics at
    the variable's address."""
    monkeypatch.setenv(ENV_LISTEN, "127.0.0.1:9100")
    flags = ["--broker-id", "1", "--listen", "127.0.0.1:9093", "--controllers", "127.0.0.1:9090"]
    flags += ["--data-dir", "d", "--secret-file", "s", "--metrics-listen", ""]
    config = config_loading.load(BrokerConfig, "broker", flags, os.environ)
    assert config.metrics_listen is None
    started: list[MetricsEndpoint] = []

    def start(name: str, endpoint: MetricsEndpoint) -> metrics.MetricsServer:
        started.append(endpoint)
        return metrics.MetricsServer(endpoint.port, lambda: None)

    monkeypatch.setattr(metrics, "start", start)
    assert metrics.serve(config.metrics_listen, "samsa-broker-1") is None  # as run_service does
    assert started == []
    metrics.serve("127.0.0.1:9101", "samsa-broker-1")
    assert started == [MetricsEndpoint("127.0.0.1", 9101)]


def test_an_ipv6_address_is_served() -> None:
    """`--metrics-listen [::1]:PORT` (as gRPC listeners are written) stopped the service with
    'cannot serve metrics on [::1]:PORT: Name or service not known': the brackets went to the
    resolver. Checked in a child process (metrics.start installs the process's meter provider)."""
    child = (
        "import urllib.request\n"
        "from samsa.services.runtime import metrics\n"
        "served = metrics.start('test', metrics.parse_listen('[::1]:0'))\n"
        "url = f'http://[::1]:{served.port}/metrics'\n"
        "print(urllib.request.urlopen(url, timeout=30).status)\n"
        "served.shutdown()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "200"
