"""python -m raycompo.grafana against bad input and servers that are not Prometheus
(issue 33, defect 10): one line, exit 2, nothing installed, nothing sent that Grafana would
not send. The servers are tiny http.server ones on 127.0.0.1, in a thread."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from raycompo.grafana import ENV_DIR, main

SERIES = [{"__name__": "ray_raycompo_round", "namespace": "run1", "task": "t", "algo": "a"}]
MATRIX = {"resultType": "matrix", "result": [{"metric": {}, "values": [[0, "1"]]}]}


@pytest.fixture
def server():
    """A server on 127.0.0.1 answering /api/v1/series and /api/v1/query_range with the bodies
    in `answers` (JSON text); `asked` collects the query strings it received."""
    answers: dict[str, str] = {}
    asked: list[dict[str, list[str]]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            url = urllib.parse.urlsplit(self.path)
            asked.append({"path": [url.path], **urllib.parse.parse_qs(url.query)})
            body = answers.get(url.path, "{}").encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", answers, asked
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and len(captured.err.strip().splitlines()) == 1, captured.err
    assert captured.err.startswith("error: ")
    return captured.err


def test_an_empty_check_url_is_refused_and_installs_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(ENV_DIR, str(tmp_path / "dashboards"))
    assert main(["--check", ""]) == 2
    assert "--check must be the URL of a Prometheus, http://HOST:PORT" in one_error_line(capsys)
    assert not (tmp_path / "dashboards").exists()
    assert main(["--check", "127.0.0.1:9090"]) == 2  # no scheme
    assert "got '127.0.0.1:9090'" in one_error_line(capsys)


@pytest.mark.parametrize("url, said", [
    ("http://[::1", "Invalid IPv6 URL"),  # was a ValueError traceback, exit 1
    ("http://[zz]:9090", "does not appear to be an IPv4 or IPv6 address"),
    ("http://", "got 'http://'"),
    ("ftp://x", "got 'ftp://x'"),
    ("localhost:9090", "got 'localhost:9090'"),
    ("http://:9090", "no host"),
    ("http://127.0.0.1:99999", "the port must be a number in 1-65535"),
    ("http://127.0.0.1:0", "the port must be a number in 1-65535"),
    ("http://127.0.0.1:abc", "the port must be a number in 1-65535"),  # was http.client.InvalidURL
    ("http://a b:9090", "a space or a control character"),  # was http.client.InvalidURL
])
def test_a_malformed_check_url_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, url, said):
    monkeypatch.setenv(ENV_DIR, str(tmp_path / "dashboards"))
    assert main(["--check", url]) == 2
    err = one_error_line(capsys)
    assert err.startswith("error: --check must be the URL of a Prometheus, http://HOST:PORT") and said in err, err
    assert "cannot query the Prometheus" not in err  # refused before any request
    assert not (tmp_path / "dashboards").exists()


def test_a_malformed_check_url_from_the_command_line(tmp_path):
    """The same through `python -m raycompo.grafana`, as a user types it: no traceback."""
    proc = subprocess.run([sys.executable, "-m", "raycompo.grafana", "--check", "http://[::1"],
                          capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[1],
                          env={**os.environ, ENV_DIR: str(tmp_path / "dashboards")})
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("error: --check must be the URL of a Prometheus") and "Invalid IPv6 URL" in proc.stderr


@pytest.mark.parametrize("series, query, said", [
    ("[1, 2, 3]", "{}", "not the Prometheus HTTP API (expected a JSON object with a 'status', got '[1, 2, 3]')"),
    ("hello", "{}", "the reply is not JSON"),
    ('{"status": "success"}', "{}", "a 'success' reply without 'data'"),
    ('{"status": "success", "data": [1, 2]}', "{}", "/api/v1/series answered [1, 2], not a list of label sets"),
    (json.dumps({"status": "success", "data": SERIES}), '{"status": "success", "data": [4]}',
     "/api/v1/query_range answered [4], not an object with a 'result' list"),
])
def test_a_server_that_is_not_prometheus_is_one_line(server, capsys, series, query, said):
    url, answers, _ = server
    answers.update({"/api/v1/series": series, "/api/v1/query_range": query})
    assert main(["--check", url]) == 2
    err = one_error_line(capsys)
    assert err.startswith(f"error: cannot query the Prometheus at {url}: ") and said in err, err


@pytest.mark.parametrize("value", ["inf", "nan", "-5", "0"])
def test_a_scrape_interval_that_cannot_be_is_refused_before_any_query(server, capsys, value):
    url, answers, asked = server
    assert main(["--check", url, "--scrape-interval", value]) == 2
    err = one_error_line(capsys)
    assert "--scrape-interval must be a finite number of seconds > 0" in err and f"got {float(value)!r}" in err
    assert "cannot query the Prometheus" not in err  # the server is not blamed
    assert asked == []


def test_a_prometheus_that_answers_gets_grafanas_rate_interval(server, capsys):
    """With a 5 s scrape over 30 min, Grafana's $__rate_interval is max(interval + scrape,
    4 scrape) = 20 s, interval = max(1800 / 1000, 5) = 5 s."""
    url, answers, asked = server
    answers.update({"/api/v1/series": json.dumps({"status": "success", "data": SERIES}),
                    "/api/v1/query_range": json.dumps({"status": "success", "data": MATRIX})})
    assert main(["--check", url, "--scrape-interval", "5"]) == 0
    queries = [q["query"][0] for q in asked if "query" in q]
    rated = [q for q in queries if "rate(" in q]
    assert rated and all("[20s]" in q for q in rated)
    assert not any(bad in q for q in queries for bad in ("[-", "[nan", "[inf"))
    assert f"all {len(queries)} queries answered" in capsys.readouterr().out


def test_the_check_asks_for_the_dashboards_range_as_its_graphs_do(server, capsys):
    """Every query is a range query over the dashboard's last 30 minutes in steps of
    $__interval (a finished run's gauges are gone from an instant query within seconds:
    Ray drops a gauge two report intervals after its process stops setting it), and the
    runs are looked up in that range too."""
    url, answers, asked = server
    answers.update({"/api/v1/series": json.dumps({"status": "success", "data": SERIES}),
                    "/api/v1/query_range": json.dumps({"status": "success", "data": MATRIX})})
    before = time.time()
    assert main(["--check", url, "--scrape-interval", "1"]) == 0
    after = time.time()
    assert {q["path"][0] for q in asked} == {"/api/v1/series", "/api/v1/query_range"}
    for q in asked:
        start, end = float(q["start"][0]), float(q["end"][0])
        assert before - 1 <= end <= after + 1 and end - start == pytest.approx(1800, abs=0.01)
        if q["path"][0] == "/api/v1/query_range":
            assert q["step"] == ["2s"]  # $__interval: max(1800 / 1000, 1) s, rounded up
    capsys.readouterr()
