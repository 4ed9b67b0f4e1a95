"""What this process has done, counted for ``/metrics`` (Prometheus' text exposition format).

A handful of counters and histograms, kept in memory by the code that does the work
(``METRICS``: the gateway's requests and turns, a session lease's wait) and written out by
``render`` in the text format Prometheus scrapes (version 0.0.4), with gauges the caller
reads at that moment (a database pool's, the hub's). Hand-written rather than
``prometheus_client``: a few metrics need no dependency, and nothing here costs a process
that never serves. Thread-safe: turns and leases run on worker threads.
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

# seconds: from a quick database call to a turn's ten-minute wait
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
           300.0, 600.0)
Labels = tuple[tuple[str, str], ...]
Sample = tuple[str, Mapping[str, str], float]  # name, labels, value


@dataclass(frozen=True)
class Kind:
    """One metric's type and help text."""

    type: str  # counter | gauge | histogram
    help: str


KINDS: dict[str, Kind] = {
    "clawd_http_requests_total": Kind("counter", "HTTP requests answered, by status class "
                                      "(1xx-5xx; none: the client left before an answer)."),
    "clawd_http_request_seconds": Kind("histogram", "Time from a request's arrival to the "
                                       "end of its answer (a stream: the end of its turn)."),
    "clawd_turns_started_total": Kind("counter", "Turns that began to run on this worker."),
    "clawd_turns_ended_total": Kind("counter", "Turns that ended on this worker, however."),
    "clawd_turns_failed_total": Kind("counter", "Turns that ended failed (an error, a "
                                     "provider that did not answer, a bug)."),
    "clawd_turns_aborted_total": Kind("counter", "Turns stopped by an abort or a shutdown."),
    "clawd_turn_queue_wait_seconds": Kind("histogram", "Time a turn waited in its session's "
                                          "queue, from its arrival to its start."),
    "clawd_turn_seconds": Kind("histogram", "Time a turn ran."),
    "clawd_lease_wait_seconds": Kind("histogram", "Time taken to take a session's lease "
                                     "(waiting for another holder included)."),
    "clawd_lease_busy_total": Kind("counter", "Leases not taken: the session was held "
                                   "elsewhere (another worker, a chat in a terminal)."),
    "clawd_errors_total": Kind("counter", "Failures that were not the client's: a request "
                               "answered 500 (kind=request), a turn that raised (kind=turn)."),
    "clawd_log_messages_total": Kind("counter", "Warnings and errors written to the log."),
}
ZERO: tuple[str, ...] = ("clawd_turns_started_total", "clawd_turns_ended_total",
                         "clawd_turns_failed_total", "clawd_turns_aborted_total",
                         "clawd_lease_busy_total")  # shown at 0 before anything happened


@dataclass
class Histogram:
    counts: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))
    sum: float = 0.0
    count: int = 0

    def observe(self, value: float) -> None:
        at = bisect.bisect_left(BUCKETS, value)
        if at < len(BUCKETS):
            self.counts[at] += 1
        self.sum += value
        self.count += 1


class Metrics:
    """This process's counters and histograms."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counters: dict[tuple[str, Labels], float] = {}
        self.histograms: dict[tuple[str, Labels], Histogram] = {}
        self.started = time.time()

    def inc(self, name: str, value: float = 1.0, **labels: str) -> None:
        key = (name, tuple(sorted(labels.items())))
        with self._lock:
            self.counters[key] = self.counters.get(key, 0.0) + value

    def observe(self, name: str, value: float, **labels: str) -> None:
        key = (name, tuple(sorted(labels.items())))
        with self._lock:
            found = self.histograms.get(key)
            if found is None:
                found = self.histograms[key] = Histogram()
            found.observe(max(0.0, value))

    def value(self, name: str, **labels: str) -> float:
        """A counter's value (0 if never counted), or a histogram's count."""
        key = (name, tuple(sorted(labels.items())))
        with self._lock:
            if key in self.histograms:
                return float(self.histograms[key].count)
            return self.counters.get(key, 0.0)

    # --- what is counted --------------------------------------------------------------------

    def request(self, status: int, seconds: float) -> None:
        self.inc("clawd_http_requests_total", code=f"{status // 100}xx" if status else "none")
        self.observe("clawd_http_request_seconds", seconds)

    def turn_started(self, waited: float) -> float:
        """A turn starts after ``waited`` seconds in its queue; the time it started."""
        self.inc("clawd_turns_started_total")
        self.observe("clawd_turn_queue_wait_seconds", waited)
        return time.monotonic()

    def turn_ended(self, started: float, failed: bool, aborted: bool) -> float:
        """A turn that started at ``started`` has ended; how long it ran."""
        took = time.monotonic() - started
        self.inc("clawd_turns_ended_total")
        if failed:
            self.inc("clawd_turns_failed_total")
        if aborted:
            self.inc("clawd_turns_aborted_total")
        self.observe("clawd_turn_seconds", took)
        return took

    def lease(self, seconds: float, taken: bool) -> None:
        self.observe("clawd_lease_wait_seconds", seconds)
        if not taken:
            self.inc("clawd_lease_busy_total")

    def error(self, kind: str) -> None:
        self.inc("clawd_errors_total", kind=kind)

    # --- the exposition ---------------------------------------------------------------------

    def render(self, read: Iterable[tuple[str, Kind, list[Sample]]] = (),
               **common: str) -> str:
        """Every metric in the text format, each sample labelled with ``common`` (e.g. the
        worker's pid); ``read``: (name, kind, samples) the caller read just now (gauges, a
        pool's own counters)."""
        with self._lock:
            counters = dict(self.counters)
            histograms = {key: Histogram(list(h.counts), h.sum, h.count)
                          for key, h in self.histograms.items()}
        for name in ZERO:
            counters.setdefault((name, ()), 0.0)
        out: list[str] = []
        for name, kind in KINDS.items():
            mine = sorted((labels, v) for (n, labels), v in counters.items() if n == name)
            hist = sorted((labels, h) for (n, labels), h in histograms.items() if n == name)
            if not mine and not hist:
                continue
            out += [f"# HELP {name} {kind.help}", f"# TYPE {name} {kind.type}"]
            for labels, value in mine:
                out.append(_sample(name, {**common, **dict(labels)}, value))
            for labels, h in hist:
                base = {**common, **dict(labels)}
                running = 0
                for bound, count in zip(BUCKETS, h.counts):
                    running += count
                    out.append(_sample(f"{name}_bucket", {**base, "le": _number(bound)},
                                       running))
                out.append(_sample(f"{name}_bucket", {**base, "le": "+Inf"}, h.count))
                out.append(_sample(f"{name}_sum", base, h.sum))
                out.append(_sample(f"{name}_count", base, h.count))
        for name, kind, samples in read:
            out += [f"# HELP {name} {kind.help}", f"# TYPE {name} {kind.type}"]
            out += [_sample(n, {**common, **labels}, v) for n, labels, v in samples]
        return "\n".join(out) + "\n"


def _sample(name: str, labels: Mapping[str, str], value: float) -> str:
    if not labels:
        return f"{name} {_number(value)}"
    inner = ",".join(f'{k}="{_escaped(str(v))}"' for k, v in labels.items())
    return f"{name}{{{inner}}} {_number(value)}"


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return str(int(value)) if float(value).is_integer() else repr(float(value))


METRICS = Metrics()  # the process's
