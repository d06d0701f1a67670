"""Teacher server faults against a real `transformers serve` on 127.0.0.1 behind a proxy
that answers 429 or 500, drops the connection or stalls: transient faults are retried
with backoff (bounded), a server that keeps failing stops the stage with one clear
message, and what was paid for stays in the cache for the re-run."""

from __future__ import annotations

import http.server
import json
import threading
import time

import pytest

from leap_kalm.llm.client import ChatClient, ClientParams
from leap_kalm.teachers.factory import TeacherUnavailableError, make_guarded_teacher
from tests.llm.test_client import _FlakyProxy, server  # noqa: F401 - the real server fixture
from tests.teachers.test_teachers import TRAJECTORY

# generous enough that the real server's answers never time out on a loaded machine (a
# spurious retry would change the request counts the tests check); a stall outlasts it
CLIENT_TIMEOUT_S = 5.0


class _FaultyProxy(_FlakyProxy):
    """Answers POSTs with the queued faults in turn (then forwards to the real server, or
    keeps failing with ``forever``)."""

    upstream = ""
    faults: list[str] = []
    forever: str | None = None
    posts = 0
    bodies: list[bytes] = []

    def do_POST(self):  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers["Content-Length"]))
        cls = type(self)
        cls.posts += 1
        cls.bodies.append(body)
        fault = cls.faults.pop(0) if cls.faults else cls.forever
        if fault == "drop":  # the connection closes with no answer
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if fault == "stall":  # longer than the client's timeout
            time.sleep(CLIENT_TIMEOUT_S + 1)
            return
        if fault in ("429", "500"):
            self.send_response(int(fault))
            self.send_header("Content-Type", "application/json")
            if fault == "429":
                self.send_header("Retry-After", "0")
            self.end_headers()
            self.wfile.write(b'{"error": {"message": "injected fault"}}')
            return
        self.forward(body)


@pytest.fixture
def proxy(server):  # noqa: F811 - pytest injects the imported fixture
    handler = type(
        "Proxy", (_FaultyProxy,), {"upstream": server, "faults": [], "posts": 0, "bodies": []}
    )
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield handler, f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()


PRIVILEGED = {
    "task": "put a mug in sink", "task_type": "pick_and_place_simple",
    "essential_objects": [{"name": "mug 1", "role": "target", "location": "shelf 1",
                           "location_closed": False}],
    "critical_receptacles": [], "closed_receptacles": [], "optimal_actions": ["go to shelf 1"],
}  # fmt: skip


def _client(url, model, cache, **extra):
    return {"base_url": url, "model": model, "max_tokens": 8, "cache_dir": str(cache),
            "timeout": CLIENT_TIMEOUT_S, **extra}  # fmt: skip


@pytest.mark.parametrize("fault", ["429", "500", "drop", "stall"])
def test_a_transient_fault_is_retried_and_the_reply_kept(proxy, tiny_model_dir, tmp_path, fault):
    handler, url = proxy
    handler.faults = [fault, fault]
    client = ChatClient(ClientParams(**_client(url, tiny_model_dir, tmp_path, max_retries=3)))
    result = client.complete([{"role": "user", "content": f"after {fault}"}])
    assert not result.cached and handler.posts == 3  # two faults, then the answer
    again = ChatClient(ClientParams(**_client(url, tiny_model_dir, tmp_path)))
    assert again.complete([{"role": "user", "content": f"after {fault}"}]).cached
    assert handler.posts == 3


def test_a_server_that_keeps_failing_stops_the_stage_clearly(proxy, tiny_model_dir, tmp_path):
    """The first trajectory gets real (unusable, from the tiny model) replies, which are
    paid for and cached; then the server fails for good: the teacher stops with one
    message naming the server and the retries, after a bounded number of requests; the
    re-run, with the server back, reuses the cached replies."""
    handler, url = proxy
    params = {
        "kind": "llm", "max_attempts": 2, "on_failure": "skip",
        "client": _client(url, tiny_model_dir, tmp_path, max_retries=2),
    }  # fmt: skip
    teacher = make_guarded_teacher("alfworld", params)
    assert teacher.correct(TRAJECTORY, PRIVILEGED) == (None, "llm")  # answered, but no valid JSON
    paid = handler.posts
    assert paid == 2 and teacher.failures[0]["task"] == "correct"
    handler.forever = "500"
    steps = [{**step, "action": "go to shelf 1"} for step in TRAJECTORY["steps"]]
    other = {**TRAJECTORY, "game_id": "g2", "steps": steps}  # a new request
    with pytest.raises(TeacherUnavailableError) as info:
        teacher.correct(other, PRIVILEGED)
    message = str(info.value)
    assert url in message and "failed after 2 retries" in message
    assert "InternalServerError" in message and str(tmp_path) in message
    assert handler.posts == paid + 3  # one request and two retries: bounded
    handler.forever, handler.posts = None, 0
    rerun = make_guarded_teacher("alfworld", params)
    rerun.correct(TRAJECTORY, PRIVILEGED)
    assert handler.posts == 0 and rerun.usage()["cache_hits"] == 2


def test_killed_while_the_teacher_annotates_no_reply_is_paid_for_twice(
    proxy, tiny_model_dir, tmp_path
):
    """`leap_iter` iteration 0 with an LLM teacher, SIGKILLed once some replies are in:
    the same command finishes, and no request reaches the server twice (the replies of the
    killed run come from the cache)."""
    import os
    import signal
    import subprocess

    from tests.helpers import KEDRO, copy_project

    handler, url = proxy
    project = copy_project(tmp_path / "project")
    params = ",".join([
        "leap_iteration=0", "alfworld.teacher.kind=llm", f"alfworld.teacher.client.base_url={url}",
        f"alfworld.teacher.client.model={tiny_model_dir}", "alfworld.teacher.client.max_tokens=64",
    ])  # fmt: skip
    command = [KEDRO, "run", "--env", "test", "--pipeline=leap_iter", "--params", params]
    env = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "1", "OMP_NUM_THREADS": "1", "CI": "true"}
    run = subprocess.Popen(command, cwd=project, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    cache = project / "data" / "02_intermediate" / "llm_cache"
    deadline = time.monotonic() + 300
    while len(list(cache.rglob("*.json"))) < 2:
        assert run.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline, "no teacher reply within 300 s"
        time.sleep(0.05)
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    paid = {path.stem for path in cache.rglob("*.json")}  # replies received and kept
    before = len(handler.bodies)
    again = subprocess.run(
        command, cwd=project, env=env, capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    client = ChatClient(ClientParams(base_url=url, model=tiny_model_dir, cache_dir=None))
    keys = [client.cache_key(json.loads(body)) for body in handler.bodies]
    assert paid <= set(keys[:before])  # the keys here are the client's own cache keys
    asked = set(keys[before:])
    assert asked and not asked & paid  # the rest was asked for, a paid reply never again
    annotated = (project / "data/test/03_primary/alfworld/annotated_logs.jsonl").read_text()
    assert annotated.count("\n") == 6  # every expert trajectory, once
