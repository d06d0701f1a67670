import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from kedro.io.core import DatasetError, Version

from leap_kalm.datasets import JSONLDataset

RECORDS = [{"game_id": f"g{i}", "value": i, "text": "é ✓"} for i in range(5)]


def test_round_trip(tmp_path):
    ds = JSONLDataset(filepath=str(tmp_path / "a.jsonl"))
    ds.save(RECORDS)
    assert ds.load() == RECORDS
    assert ds.exists()
    lines = (tmp_path / "a.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 5 and json.loads(lines[2]) == RECORDS[2]


def test_versioned_saves_keep_every_version(tmp_path):
    path = str(tmp_path / "v.jsonl")
    JSONLDataset(filepath=path, version=Version(None, "2026-01-01T00.00.00.000Z")).save(RECORDS[:2])
    JSONLDataset(filepath=path, version=Version(None, "2026-01-02T00.00.00.000Z")).save(RECORDS[:3])
    assert len(JSONLDataset(filepath=path, version=Version(None, None)).load()) == 3
    assert (
        len(JSONLDataset(filepath=path, version=Version("2026-01-01T00.00.00.000Z", None)).load())
        == 2
    )


def test_malformed_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n{"a": oops}\n{"a": 4}\n')
    with pytest.raises(DatasetError, match=r"bad\.jsonl, line 3: malformed JSON"):
        JSONLDataset(filepath=str(path)).load()


def test_non_object_line_is_rejected(tmp_path):
    path = tmp_path / "list.jsonl"
    path.write_text('{"a": 1}\n[1, 2]\n')
    with pytest.raises(DatasetError, match="line 2: expected a JSON object, got list"):
        JSONLDataset(filepath=str(path)).load()


def test_missing_file_says_what_to_do(tmp_path):
    with pytest.raises(DatasetError, match="no file at .*nothing.jsonl"):
        JSONLDataset(filepath=str(tmp_path / "nothing.jsonl")).load()


def test_unknown_save_args_and_mode_are_rejected(tmp_path):
    with pytest.raises(DatasetError, match="mode must be one of"):
        JSONLDataset(filepath=str(tmp_path / "x.jsonl"), save_args={"mode": "append-ish"})
    with pytest.raises(DatasetError, match="unknown save_args"):
        JSONLDataset(filepath=str(tmp_path / "x.jsonl"), save_args={"indent": 2})
    with pytest.raises(DatasetError, match="reuse needs mode: resume"):
        JSONLDataset(filepath=str(tmp_path / "x.jsonl"), save_args={"reuse": True})


def test_unserialisable_record_is_named(tmp_path):
    ds = JSONLDataset(filepath=str(tmp_path / "x.jsonl"))
    with pytest.raises(DatasetError, match="record 1 is not JSON-serialisable"):
        ds.save([{"a": 1}, {"a": object()}])


def _producer_failing_after(k: int):
    def produce(done):
        done_ids = {r["game_id"] for r in done}
        for i, record in enumerate(r for r in RECORDS if r["game_id"] not in done_ids):
            if i == k:
                raise KeyboardInterrupt("simulated interruption")
            yield record

    return produce


def test_resume_after_interruption_loses_and_duplicates_nothing(tmp_path):
    path = tmp_path / "rollouts.jsonl"
    ds = JSONLDataset(filepath=str(path), save_args={"mode": "resume", "key": "game_id"})
    with pytest.raises(KeyboardInterrupt):
        ds.save(_producer_failing_after(2))
    assert not path.exists(), "an unfinished save must not appear at the final path"
    assert [r["game_id"] for r in ds.load_partial()] == ["g0", "g1"]
    # a torn half-line, as a kill in the middle of a write leaves it
    with open(ds.partial_path, "a", encoding="utf-8") as handle:
        handle.write('{"game_id": "g2", "val')
    seen_by_producer = []

    def produce(done):
        seen_by_producer.extend(r["game_id"] for r in done)
        # a sloppy producer that re-yields finished work: the key filter drops it
        yield from RECORDS

    ds.save(produce)
    assert seen_by_producer == ["g0", "g1"]
    assert ds.load() == RECORDS
    assert not os.path.exists(ds.partial_path)


def test_resume_of_a_killed_process(tmp_path):
    """A real producer process killed with SIGKILL mid-run resumes exactly."""
    path = tmp_path / "killed.jsonl"
    script = textwrap.dedent(
        f"""
        import sys, time
        from leap_kalm.datasets import JSONLDataset
        ds = JSONLDataset(filepath={str(path)!r}, save_args={{"mode": "resume", "key": "i"}})
        def produce(done):
            have = {{r["i"] for r in done}}
            for i in range(40):
                if i in have:
                    continue
                if i == 10 and sys.argv[1] == "slow":
                    print("halfway", flush=True)
                    time.sleep(60)
                yield {{"i": i, "payload": "x" * 100}}
        ds.save(produce)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, "slow"], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "halfway"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    ds = JSONLDataset(filepath=str(path), save_args={"mode": "resume", "key": "i"})
    assert [r["i"] for r in ds.load_partial()] == list(range(10))
    subprocess.run([sys.executable, "-c", script, "fast"], check=True)
    assert [r["i"] for r in ds.load()] == list(range(40))


def test_resume_mode_with_versioning(tmp_path):
    path = str(tmp_path / "ver.jsonl")
    version = Version(None, "2026-01-01T00.00.00.000Z")
    ds = JSONLDataset(
        filepath=path, version=version, save_args={"mode": "resume", "key": "game_id"}
    )
    with pytest.raises(KeyboardInterrupt):
        ds.save(_producer_failing_after(3))
    ds2 = JSONLDataset(
        filepath=path,
        version=Version(None, "2026-01-01T00.05.00.000Z"),
        save_args={"mode": "resume", "key": "game_id"},
    )
    ds2.save(_producer_failing_after(99))
    assert JSONLDataset(filepath=path, version=Version(None, None)).load() == RECORDS


def test_missing_ok_loads_an_empty_list(tmp_path):
    assert JSONLDataset(filepath=str(tmp_path / "none.jsonl"), missing_ok=True).load() == []
    assert (
        JSONLDataset(
            filepath=str(tmp_path / "v.jsonl"), missing_ok=True, version=Version(None, None)
        ).load()
        == []
    )


def _counting_producer(records, calls, reusable=None):
    """A producer of ``records`` that notes which ones it had to make."""

    def produce(done):
        finished = {r["game_id"] for r in done}
        for record in records:
            if record["game_id"] not in finished:
                calls.append(record["game_id"])
                yield record

    if reusable is not None:
        produce.reusable = reusable
    return produce


@pytest.mark.parametrize("versioned", [False, True])
def test_reuse_keeps_the_finished_records_the_producer_accepts(tmp_path, versioned):
    path = str(tmp_path / "logs.jsonl")

    def dataset(stamp):
        return JSONLDataset(
            filepath=path,
            version=Version(None, stamp) if versioned else None,
            save_args={"mode": "resume", "key": "game_id", "reuse": True},
        )

    first = []
    dataset("2026-01-01T00.00.00.000Z").save(_counting_producer(RECORDS, first, lambda r: True))
    assert first == [r["game_id"] for r in RECORDS]
    # the next run: g1 and g3 changed (their stored records are refused), g5 is new
    wanted = [*RECORDS[:1], {**RECORDS[1], "value": 10}, *RECORDS[2:3], {**RECORDS[3], "value": 30}]
    wanted += [RECORDS[4], {"game_id": "g5", "value": 5, "text": ""}]
    second = []
    stale = {"g1", "g3"}
    ds = dataset("2026-01-01T00.05.00.000Z")
    ds.save(_counting_producer(wanted, second, lambda r: r["game_id"] not in stale))
    assert second == ["g1", "g3", "g5"]
    loaded = JSONLDataset(filepath=path, version=Version(None, None) if versioned else None).load()
    assert sorted(loaded, key=lambda r: r["game_id"]) == wanted


def test_reuse_needs_the_producers_consent_and_a_finished_save(tmp_path):
    path = str(tmp_path / "logs.jsonl")
    args = {"mode": "resume", "key": "game_id", "reuse": True}
    calls = []
    JSONLDataset(filepath=path, save_args=args).save(_counting_producer(RECORDS, calls))
    calls.clear()  # a producer without ``reusable``: everything is made again
    JSONLDataset(filepath=path, save_args=args).save(_counting_producer(RECORDS, calls))
    assert len(calls) == len(RECORDS)
    calls.clear()  # without ``reuse`` the predicate is not consulted
    plain = {"mode": "resume", "key": "game_id"}
    JSONLDataset(filepath=path, save_args=plain).save(
        _counting_producer(RECORDS, calls, lambda r: True)
    )
    assert len(calls) == len(RECORDS)
    assert JSONLDataset(filepath=path).load() == RECORDS


def test_a_damaged_finished_file_is_computed_again_not_reused(tmp_path, caplog):
    path = tmp_path / "logs.jsonl"
    path.write_text(json.dumps(RECORDS[0]) + "\n{not json\n" + json.dumps(RECORDS[1]) + "\n")
    calls = []
    ds = JSONLDataset(
        filepath=str(path), save_args={"mode": "resume", "key": "game_id", "reuse": True}
    )
    with caplog.at_level("WARNING"):
        ds.save(_counting_producer(RECORDS, calls, lambda r: True))
    assert calls == [r["game_id"] for r in RECORDS]
    assert "line 2: malformed JSON" in caplog.text and "computed again" in caplog.text
    assert JSONLDataset(filepath=str(path)).load() == RECORDS
