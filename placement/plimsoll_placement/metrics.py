"""Every plimsoll-placement metric, declared once, and the Prometheus text endpoint.

Thread-safety: the sync loop writes, the HTTP thread reads; one lock guards the values."""

import http.server
import threading

# name -> (type, help, label name or None)
METRICS = {
    "plimsoll_placement_last_sync_timestamp_seconds": (
        "gauge", "Unix time of the last sync that left Placement at the line's offer (updated or already equal).",
        None),
    "plimsoll_placement_offered_bytes": (
        "gauge", "The line's offered bytes last put into Placement (what its free MEMORY_MB stands for).", None),
    "plimsoll_placement_capacity_mb": (
        "gauge", "MEMORY_MB capacity last put into Placement: (total - reserved) * allocation_ratio.", None),
    "plimsoll_placement_free_mb": (
        "gauge", "MEMORY_MB left free in Placement by the last sync: capacity - used.", None),
    "plimsoll_placement_pending_mb": (
        "gauge", "MEMORY_MB allocated in Placement to consumers plimsolld does not count yet.", None),
    "plimsoll_placement_updates_total": (
        "counter", "Inventory updates (PUT) accepted by Placement.", None),
    "plimsoll_placement_conflicts_total": (
        "counter", "Inventory updates refused with 409 (generation moved) and retried after a re-read.", None),
    "plimsoll_placement_sync_failures_total": (
        "counter", "Syncs that failed, by reason (unreachable, auth, forbidden, conflict, provider_not_found, "
        "no_inventory, nothing_to_scale, bad_response, http_<code>); each is retried with backoff.", "reason"),
    "plimsoll_placement_line_unusable": (
        "gauge", "1 while plimsolld gives no usable line, by kind (unreachable, stale, unimplemented, error): "
        "Placement keeps its last value.", "kind"),
    "plimsoll_placement_line_unusable_total": (
        "counter", "Syncs skipped because plimsolld gave no usable line, by kind.", "kind"),
    "plimsoll_placement_line_tick": (
        "gauge", "The plimsolld tick of the last usable line.", None),
}

LINE_KINDS = ("unreachable", "stale", "unimplemented", "error")


class Metrics:
    def __init__(self):
        self._lock = threading.Lock()
        self._values = {}
        for kind in LINE_KINDS:
            self._values[("plimsoll_placement_line_unusable", kind)] = 0

    def set(self, name, value, label=None):
        assert name in METRICS, name
        with self._lock:
            self._values[(name, label)] = value

    def inc(self, name, label=None, by=1):
        assert name in METRICS, name
        with self._lock:
            self._values[(name, label)] = self._values.get((name, label), 0) + by

    def get(self, name, label=None):
        with self._lock:
            return self._values.get((name, label))

    def text(self):
        """The Prometheus text exposition format (0.0.4)."""
        with self._lock:
            values = dict(self._values)
        out = []
        for name, (kind, help_text, label_name) in METRICS.items():
            series = sorted((lbl, v) for (n, lbl), v in values.items() if n == name)
            if not series:
                continue
            out.append("# HELP %s %s" % (name, help_text))
            out.append("# TYPE %s %s" % (name, kind))
            for lbl, v in series:
                labels = '{%s="%s"}' % (label_name, lbl) if label_name else ""
                out.append("%s%s %s" % (name, labels, repr(float(v)) if isinstance(v, float) else v))
        return "\n".join(out) + "\n"


def serve(metrics, listen):
    """Serves /metrics on `host:port` from a daemon thread; returns the server."""
    host, _, port = listen.rpartition(":")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404, "only /metrics here")
                return
            body = metrics.text().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # scrapes are not news
            pass

    server = http.server.ThreadingHTTPServer((host.strip("[]"), int(port)), Handler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
