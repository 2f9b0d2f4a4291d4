"""Goal: deploy/grafana/samsa-dashboard.json only names metrics the services really export, asks
for its Prometheus data source as an input, and keeps the panels a Kafka operator watches.

Method: the instruments are read from the services' sources with `ast` (every `create_counter`,
`create_histogram`, `create_observable_gauge`, ... call: kind, name and unit; nothing is imported
from services/), then created under the same kind, name and unit on a private meter provider read
by OpenTelemetry's Prometheus exporter, exactly as the services serve them. The names in its
exposition text are the names a scrape shows — the exporter's own mangling (dots to underscores,
`_total` on counters, units such as `_bytes` and `_milliseconds`, `_bucket` on histograms), not a
copy of its rules — plus the families of the tables (`CounterTable("name", ...)`, `GaugeTable`:
series labelled by what comes and goes, which services/runtime/labelled_series.py serves through
prometheus_client's own family classes, built here the same way) and prometheus_client's default
process and Python collectors, which every service's /metrics serves too. Every metric name in
every panel's PromQL and every template query must be one of them.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

REPO = Path(__file__).resolve().parents[3]
DASHBOARD = REPO / "deploy/grafana/samsa-dashboard.json"
SERVICES = REPO / "services"
DATASOURCE = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
SYNCHRONOUS = {
    "create_counter": "add",
    "create_up_down_counter": "add",
    "create_histogram": "record",
    "create_gauge": "set",
}
OBSERVABLE = ("create_observable_counter", "create_observable_up_down_counter",
              "create_observable_gauge")  # fmt: skip
# Series labelled by what comes and goes, served by a collector beside the instruments
# (services/runtime/labelled_series.py): the class that makes each kind of family.
TABLES = {"CounterTable": CounterMetricFamily, "GaugeTable": GaugeMetricFamily}
# PromQL words that look like metric names but are not (functions are told by their "(").
PROMQL_WORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan", "group_left", "group_right"}


@dataclass(frozen=True)
class Instrument:
    kind: str  # the Meter method that creates it: create_counter, ...; or CounterTable, GaugeTable
    name: str
    unit: str
    where: str  # file:line, for a failure's message


def instruments_in(root: Path) -> Iterator[Instrument]:
    """Every instrument created in the modules under `root`; a name or unit that is not a string
    literal fails here, so that no instrument goes unchecked."""
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in TABLES
            ):
                where = f"{path.relative_to(REPO)}:{node.lineno}"
                name = node.args[0] if node.args else None
                assert isinstance(name, ast.Constant) and isinstance(name.value, str), (
                    f"{where}: the table's name must be a string literal"
                )
                yield Instrument(node.func.id, name.value, "", where)
                continue
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in (*SYNCHRONOUS, *OBSERVABLE)
            ):
                continue
            where = f"{path.relative_to(REPO)}:{node.lineno}"
            keywords = {keyword.arg: keyword.value for keyword in node.keywords}
            name = node.args[0] if node.args else keywords.get("name")
            unit = keywords.get("unit", ast.Constant(""))
            for value in (name, unit):
                assert isinstance(value, ast.Constant) and isinstance(value.value, str), (
                    f"{where}: the instrument's name and unit must be string literals"
                )
            yield Instrument(node.func.attr, name.value, unit.value, where)  # type: ignore[union-attr]


def exported_names(instruments: list[Instrument]) -> set[str]:
    """The sample names a scrape shows for `instruments`, from the real exporter."""
    registry = CollectorRegistry()
    provider = MeterProvider(metric_readers=[PrometheusMetricReader(registry=registry)])
    meter = provider.get_meter("samsa")

    def observe(options: CallbackOptions) -> list[Observation]:
        return [Observation(1)]

    class Tables:
        def __init__(self, families: list) -> None:  # type: ignore[type-arg]
            self.families = families

        def collect(self) -> list:  # type: ignore[type-arg]
            return self.families

    tables = []
    try:
        for instrument in instruments:
            if instrument.kind in TABLES:
                family = TABLES[instrument.kind](instrument.name, "", labels=["label"])
                family.add_metric(["value"], 1)
                tables.append(family)
                continue
            create = getattr(meter, instrument.kind)
            if instrument.kind in OBSERVABLE:
                create(instrument.name, [observe], unit=instrument.unit)
            else:
                created = create(instrument.name, unit=instrument.unit)
                getattr(created, SYNCHRONOUS[instrument.kind])(1)
        registry.register(Tables(tables))
        # What the default registry that the services' /metrics serves holds besides.
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
        text = generate_latest(registry).decode()
    finally:
        provider.shutdown()
    return {
        re.split(r"[{ ]", line, maxsplit=1)[0]
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: identifiers left once strings, label
    matchers, range selectors, grouping clauses and Grafana variables are cut out, other than
    function names (followed by "(") and PromQL keywords."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\$\{?\w+\}?", " ", text)
    names = set()
    for match in re.finditer(r"(?<![\w.])[A-Za-z_:][A-Za-z0-9_:]*", text):
        if text[match.end() :].lstrip().startswith("(") or match.group() in PROMQL_WORDS:
            continue
        names.add(match.group())
    return names


def template_query_names(query: str) -> set[str]:
    """The metric a `label_values(METRIC{...}, label)` template query reads (none for the
    one-argument form, which reads every series)."""
    match = re.fullmatch(r"\s*label_values\((.*),\s*\w+\s*\)\s*", query)
    return metric_names(match.group(1)) if match else metric_names(query)


def load_dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def panels(dashboard: dict) -> Iterator[dict]:
    """Every panel, those inside collapsed rows included (rows themselves left out)."""
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def expressions(dashboard: dict) -> Iterator[tuple[str, str]]:
    """(where, PromQL) of every panel target and template query."""
    for panel in panels(dashboard):
        for target in panel["targets"]:
            yield f"panel {panel['title']!r} {target['refId']}", target["expr"]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            yield (
                f"variable ${variable['name']}",
                (query["query"] if isinstance(query, dict) else query),
            )


@pytest.fixture(scope="module")
def exported() -> set[str]:
    return exported_names(list(instruments_in(SERVICES)))


def test_the_instruments_are_read_from_the_sources() -> None:
    found = {(i.kind, i.name) for i in instruments_in(SERVICES)}
    assert {
        ("create_histogram", "rpc.server.duration"),
        ("CounterTable", "samsa_broker_io_bytes"),
        ("create_observable_gauge", "samsa.controller.active"),
        ("GaugeTable", "samsa_coordinator_group_lag"),
    } <= found


def test_the_exporter_names_them_as_a_real_scrape_shows(exported: set[str]) -> None:
    """Names seen in a scrape of a running cluster (tests/integration/test_metrics.py)."""
    assert {
        "rpc_server_duration_milliseconds_bucket",
        "rpc_server_messages_total",
        "samsa_broker_io_bytes_total",
        "samsa_broker_records_in_total",
        "samsa_broker_partitions",
        "samsa_coordinator_group_rebalances_total",
        "process_cpu_seconds_total",
    } <= exported
    assert "samsa.broker.io" not in exported and "samsa_broker_io" not in exported


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        (
            "histogram_quantile(0.99, sum by (le, rpc_method) "
            '(rate(rpc_server_duration_milliseconds_bucket{job=~"$job"}[$__rate_interval])))',
            {"rpc_server_duration_milliseconds_bucket"},
        ),
        (
            'sum(a_total{x="y z"}) / ignoring(x) group_left b_total offset 5m',
            {"a_total", "b_total"},
        ),
        ("sum without (instance) (rate(c[1m])) > bool 1e3 and d", {"c", "d"}),
        ("vector(1)", set()),
    ],
)
def test_the_metric_names_of_an_expression_are_found(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_a_panel_naming_a_metric_the_services_lack_would_fail(exported: set[str]) -> None:
    expr = 'sum by (topic) (rate(samsa_broker_bytes_in_total{topic=~"$topic"}[5m]))'
    assert metric_names(expr) - exported == {"samsa_broker_bytes_in_total"}


def test_every_metric_the_dashboard_names_is_exported(exported: set[str]) -> None:
    unknown = []
    for where, expr in expressions(load_dashboard()):
        names = template_query_names(expr) if where.startswith("variable") else metric_names(expr)
        for name in sorted(names - exported):
            close = difflib.get_close_matches(name, exported, n=2)
            unknown.append(f"{where}: {name} (closest exported: {close})")
    assert not unknown, "\n".join(unknown)


def test_the_dashboard_watches_what_a_kafka_operator_watches() -> None:
    used = set().union(*(metric_names(expr) for _, expr in expressions(load_dashboard())))
    assert {
        "samsa_broker_records_in_total",
        "samsa_broker_io_bytes_total",
        "rpc_server_duration_milliseconds_count",
        "rpc_server_duration_milliseconds_bucket",
        "samsa_broker_partitions_under_replicated",
        "samsa_controller_partitions_offline",
        "samsa_broker_isr_shrinks_total",
        "samsa_broker_isr_expands_total",
        "samsa_controller_active",
        "samsa_controller_metadata_offset",
        "samsa_controller_brokers",
        "samsa_coordinator_group_lag",
        "samsa_coordinator_group_rebalances_total",
        "samsa_broker_producer_ids",
    } <= used
    assert any(
        "histogram_quantile(0.99" in expr and "_bucket" in expr
        for _, expr in expressions(load_dashboard())
    )


def test_the_data_source_is_an_input_and_a_variable() -> None:
    """Imported through the UI, Grafana asks for DS_PROMETHEUS (`__inputs`); provisioned from a
    file (the monitoring profile), the variable of the same name picks the default Prometheus."""
    dashboard = load_dashboard()
    assert 36 <= dashboard["schemaVersion"] <= 41
    (source,) = dashboard["__inputs"]
    assert (source["name"], source["type"], source["pluginId"]) == (
        "DS_PROMETHEUS",
        "datasource",
        "prometheus",
    )
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource"
    assert variables["DS_PROMETHEUS"]["query"] == "prometheus"
    for name, variable in variables.items():
        if variable["type"] == "query":
            assert variable["datasource"] == DATASOURCE, name
    for panel in panels(dashboard):
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], f"{panel['title']}: no query"
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]


def test_panels_have_unique_ids_and_fit_the_grid() -> None:
    dashboard = load_dashboard()
    ids = [panel["id"] for panel in dashboard["panels"]]
    ids += [panel["id"] for panel in panels(dashboard) if panel not in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["w"] > 0 and grid["x"] + grid["w"] <= 24, panel["title"]
