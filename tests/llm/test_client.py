"""The OpenAI-compatible client against a real `transformers serve` on 127.0.0.1."""

from __future__ import annotations

import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from leap_kalm.llm.client import APIKeyMissingError, ChatClient, ClientParams, resolve_api_key


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(tiny_model_dir):
    port = _free_port()
    exe = str(Path(sys.executable).with_name("transformers"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [exe, "serve", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,  # its own process group, stopped as a whole below
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"{url}/v1/models", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("transformers serve did not come up within 120 s")
        # the server loads a model on its first request for it: load it here, so that the
        # tests' short client timeouts time only answers (a cold first answer outlasted the
        # fault tests' 5 s once and added a retry to the request counts they check)
        warm = json.dumps(
            {"model": tiny_model_dir, "max_tokens": 1,
             "messages": [{"role": "user", "content": "warm up"}]}
        ).encode()  # fmt: skip
        request = urllib.request.Request(
            f"{url}/v1/chat/completions", warm, {"Content-Type": "application/json"}
        )
        urllib.request.urlopen(request, timeout=120).read()
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


class _FlakyProxy(http.server.BaseHTTPRequestHandler):
    """Answers the first `failures` POSTs with 503, then forwards to the real server."""

    upstream = ""
    failures = 0
    posts = 0

    def do_POST(self):  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).posts += 1
        if type(self).failures > 0:
            type(self).failures -= 1
            self.send_response(503)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"error": {"message": "overloaded"}}')
            return
        self.forward(body)

    def forward(self, body: bytes) -> None:
        """Pass the request on to the real server and its answer back."""
        request = urllib.request.Request(
            self.upstream + self.path, data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            payload = response.read()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def flaky(server):
    handler = type("Proxy", (_FlakyProxy,), {"upstream": server, "failures": 0, "posts": 0})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield handler, f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()


MESSAGES = [{"role": "user", "content": "Say hello."}]


def _params(base_url, tiny_model_dir, cache_dir, **extra):
    return ClientParams(
        base_url=base_url, model=tiny_model_dir, max_tokens=6, cache_dir=str(cache_dir), **extra
    )


def test_completion_then_cache_hit_on_rerun(flaky, tiny_model_dir, tmp_path):
    handler, url = flaky
    client = ChatClient(
        _params(url, tiny_model_dir, tmp_path, price_per_1k_prompt=1.0),
        credentials={"api_key": "sk-secret-123"},
    )
    first = client.complete(MESSAGES)
    assert not first.cached and first.prompt_tokens > 0 and first.completion_tokens > 0
    assert first.cost == pytest.approx(first.prompt_tokens / 1000)
    assert handler.posts == 1
    rerun = ChatClient(
        _params(url, tiny_model_dir, tmp_path), credentials={"api_key": "sk-secret-123"}
    )
    second = rerun.complete(MESSAGES)
    assert second.cached and second.text == first.text
    assert handler.posts == 1, "a re-run must not call the API"
    assert rerun.usage.as_dict()["cache_hits"] == 1 and rerun.usage.api_calls == 0
    stored = "".join(p.read_text() for p in tmp_path.rglob("*.json"))
    assert "sk-secret-123" not in stored
    other = rerun.complete(MESSAGES, temperature=0.5)  # a different request is a cache miss
    assert not other.cached and handler.posts == 2


def test_retries_after_a_failing_server(flaky, tiny_model_dir, tmp_path):
    handler, url = flaky
    handler.failures = 2
    client = ChatClient(_params(url, tiny_model_dir, tmp_path, max_retries=3))
    result = client.complete([{"role": "user", "content": "retry me"}])
    assert result.text is not None and not result.cached
    assert handler.posts == 3


def test_gives_up_after_max_retries(flaky, tiny_model_dir, tmp_path):
    import openai

    handler, url = flaky
    handler.failures = 10
    client = ChatClient(_params(url, tiny_model_dir, tmp_path, max_retries=1))
    with pytest.raises(openai.InternalServerError):
        client.complete([{"role": "user", "content": "never"}])
    assert handler.posts == 2
    assert not list(tmp_path.rglob("*.json")), "failures are not cached"


def test_complete_many_keeps_order(server, tiny_model_dir, tmp_path):
    client = ChatClient(_params(server + "/v1", tiny_model_dir, tmp_path, max_concurrency=2))
    conversations = [[{"role": "user", "content": f"number {i}"}] for i in range(4)]
    results = client.complete_many(conversations)
    again = client.complete_many(conversations)
    assert [r.text for r in results] == [r.text for r in again]
    assert all(r.cached for r in again) and client.usage.api_calls == 4


def test_api_key_resolution(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    remote = ClientParams(base_url="https://api.openai.com/v1")
    with pytest.raises(APIKeyMissingError, match="conf/local/credentials.yml.*OPENAI_API_KEY"):
        resolve_api_key(remote)
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert resolve_api_key(remote) == "from-env"
    assert resolve_api_key(remote, {"api_key": "from-credentials"}) == "from-credentials"
    monkeypatch.delenv("OPENAI_API_KEY")
    assert resolve_api_key(ClientParams(base_url="http://127.0.0.1:9/v1"))
    with pytest.raises(ValueError, match="unknown keys"):
        ClientParams.from_dict({"modle": "x"})
    json.dumps(ClientParams().__dict__)  # parameters serialise
