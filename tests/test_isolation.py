"""`in_fresh_process`: a generator run in a spawned process, its items, errors and death."""

from __future__ import annotations

import logging
import os

import pytest

from leap_kalm.isolation import FreshProcessError, in_fresh_process


def squares_and_pids(n: int, offset: int = 0):
    for i in range(n):
        yield {"i": i + offset, "square": (i + offset) ** 2, "pid": os.getpid()}


def logs(message: str):
    logging.getLogger(__name__).info(message)
    yield message


def fails_after(n: int):
    yield from range(n)
    raise ValueError("record 3 has no 'steps' field")


def dies_after(n: int):
    yield from range(n)
    os._exit(9)


def test_items_come_back_in_order_from_another_process():
    items = list(in_fresh_process(squares_and_pids, 5, offset=2))
    assert [(x["i"], x["square"]) for x in items] == [(2, 4), (3, 9), (4, 16), (5, 25), (6, 36)]
    assert {x["pid"] for x in items} != {os.getpid()} and len({x["pid"] for x in items}) == 1


def test_an_error_in_the_child_is_raised_here_with_its_message_after_the_items_it_made():
    got = []
    with pytest.raises(
        FreshProcessError,
        match=r"the test process failed after 3 items: ValueError: record 3 has no 'steps' field",
    ):
        for item in in_fresh_process(fails_after, 3, label="test"):
            got.append(item)
    assert got == [0, 1, 2]


def test_a_child_that_dies_is_named_with_its_exit_code_and_what_it_delivered():
    got = []
    with pytest.raises(FreshProcessError, match=r"died with exit code 9 after 2 items"):
        for item in in_fresh_process(dies_after, 2, label="test"):
            got.append(item)
    assert got == [0, 1]


def test_closing_early_stops_the_child():
    stream = in_fresh_process(squares_and_pids, 10_000)
    assert next(stream)["i"] == 0
    stream.close()  # must not hang on the child's full queue


def test_the_child_logs_at_the_level_its_package_has_here(capfd):
    package = logging.getLogger(__name__.split(".")[0])
    before = package.level
    try:
        package.setLevel(logging.INFO)
        assert list(in_fresh_process(logs, "shown at INFO")) == ["shown at INFO"]
        package.setLevel(logging.WARNING)
        assert list(in_fresh_process(logs, "hidden at WARNING")) == ["hidden at WARNING"]
    finally:
        package.setLevel(before)
    err = capfd.readouterr().err
    assert "shown at INFO" in err and "hidden at WARNING" not in err


def test_the_child_stops_when_its_parent_is_killed(tmp_path):
    """A `kedro run` stopped with SIGTERM or SIGKILL runs no clean-up: its fresh-process
    child must not go on computing as an orphan."""
    import signal
    import subprocess
    import sys
    import time

    pid_file = tmp_path / "child.pid"
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]);"
            "from test_isolation import writes_pid_then_works;"
            "from leap_kalm.isolation import in_fresh_process;"
            "list(in_fresh_process(writes_pid_then_works, sys.argv[2]))",
            os.path.dirname(__file__),
            str(pid_file),
        ]
    )
    child = None
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert parent.poll() is None and time.monotonic() < deadline, "the child never started"
            time.sleep(0.1)
        child = int(pid_file.read_text())
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _alive(child):
            assert time.monotonic() < deadline, f"the child {child} outlived its killed parent"
            time.sleep(0.1)
    finally:
        if parent.poll() is None:
            parent.kill()
        if child is not None and _alive(child):  # this test failed: leave no orphan behind
            os.kill(child, signal.SIGKILL)


def writes_pid_then_works(path: str):
    with open(path + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(path + ".tmp", path)
    while True:  # a long computation that yields nothing
        sum(range(10_000))
    yield  # pragma: no cover


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (dead, not yet reaped by init) counts as stopped
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False
