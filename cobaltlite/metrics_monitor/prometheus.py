"""The monitor's Prometheus endpoint: the latest sample as Prometheus text, read-only.

GET /metrics (or /) answers with every metric of catalog.py as a gauge named `cobaltlite_` +
name, plus `cobaltlite_sample_time_seconds` (when the sample was taken). A scrape only formats
the sample already in memory: it never asks the other daemons, so it costs the same at 10 jobs
or 10,000, and the sampling thread never waits for it. Each connection has a thread of its own
with a time limit (`CLIENT_TIMEOUT`), so a slow or silent client holds only that thread. Every
other method than GET and HEAD gets 501 (http.server's answer for a method it does not serve).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.core import CollectorRegistry, GaugeMetricFamily
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

from cobaltlite.metrics_monitor.catalog import METRICS, prometheus_name

CLIENT_TIMEOUT = 10.0
"""Seconds a connection may stay silent before the server drops it."""


class SampleCollector(Collector):
    """Gauges from the latest sample; none before the first sample."""

    def __init__(self, latest: Callable[[], dict[str, Any] | None]) -> None:
        self._latest = latest

    def collect(self) -> Iterator[GaugeMetricFamily]:
        sample = self._latest()
        if sample is None:
            return
        values = sample["values"]
        for metric, meaning in METRICS.items():
            if metric in values:  # a sample reloaded from an older history may lack some
                yield GaugeMetricFamily(prometheus_name(metric), meaning, value=values[metric])
        yield GaugeMetricFamily(prometheus_name("sample_time_seconds"),
                                "when the latest sample was taken (Unix time)",
                                value=sample["time"])


def metrics_text(latest: Callable[[], dict[str, Any] | None]) -> bytes:
    """The Prometheus text of the latest sample."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SampleCollector(latest))
    return generate_latest(registry)


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a connection still open never holds up the daemon's exit


class _Server6(_Server):
    address_family = socket.AF_INET6


def serve_prometheus(host: str, port: int, latest: Callable[[], dict[str, Any] | None]
                     ) -> ThreadingHTTPServer:
    """Listen on host:port in a thread of its own; OSError (a port in use) if it cannot."""

    class Handler(BaseHTTPRequestHandler):
        timeout = CLIENT_TIMEOUT
        server_version = "cobaltlite-metrics"
        sys_version = ""

        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] not in ("/", "/metrics"):
                self.send_error(404, "the metrics are at /metrics")
                return
            body = metrics_text(latest)
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_HEAD = do_GET

        def log_message(self, format: str, *args: Any) -> None:
            pass  # scrapes every few seconds would flood the monitor's log

    server = (_Server6 if ":" in host else _Server)((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="prometheus", daemon=True).start()
    return server
