"""HTTP reads of the index against a server that attacks it (tests/hostile_server.py, on
127.0.0.1 only): every read is bounded in bytes by what was asked and in time by its deadline.
What is asserted is counted (bytes read, bytes the server got to send, the reason given); the
one time bound is on the 2 s deadline under test, with a generous margin."""

from __future__ import annotations

import http.client

import pytest

from archaudit.index import remote
from hostile_server import MAX_TRICKLE, TRICKLE_GAP, hostile, settled

DEADLINE = 2.0


def test_an_endless_range_answer_is_read_no_further_than_asked():
    with hostile() as srv:
        with pytest.raises(remote.RemoteError) as e:
            remote.RangeReader(f"{srv.url}/endless.whl", seconds=30)
        assert f"asked for {remote.TAIL} bytes, the server sent more" in str(e.value)
        # the body that was read: at most the range and one byte more
        conn = http.client.HTTPConnection("127.0.0.1", int(srv.url.rsplit(":", 1)[1]), timeout=10)
        conn.request("GET", "/endless.whl", headers={"Range": "bytes=0-99"})
        resp = conn.getresponse()
        body = remote._read_body(resp, 100, remote.Deadline(30, "t"), "t")
        conn.close()
        assert len(body) == 101


def test_a_content_length_beyond_the_range_is_refused_before_its_body():
    with hostile() as srv:
        with pytest.raises(remote.RemoteError) as e:
            remote.RangeReader(f"{srv.url}/liar.whl", seconds=30)
    assert "the answer declares '1000000000000'" in str(e.value)


@pytest.mark.parametrize("path", ["/trickle.whl", "/slow-headers.whl"])
def test_a_trickling_server_holds_a_wheel_no_longer_than_its_deadline(path):
    with hostile() as srv:
        with pytest.raises(remote.RemoteError) as e:
            remote.RangeReader(f"{srv.url}{path}", seconds=DEADLINE)
        settled(srv, path)
        assert "not read within its 2 s deadline" in str(e.value)
        # the server could trickle MAX_TRICKLE bytes; it got to send about DEADLINE / TRICKLE_GAP
        assert srv.stopped_early.get(path) is True
        # counted, not timed (a loaded machine would fail a wall-clock bound): the bytes it could send
        # before the deadline cut it short
        assert srv.sent[path] <= DEADLINE / TRICKLE_GAP + 3 < MAX_TRICKLE


def test_an_endless_index_page_is_bounded_in_bytes():
    with hostile() as srv:
        with pytest.raises(remote.RemoteError) as e:
            remote.get(f"{srv.url}/simple/endless/", limit=1 << 20, seconds=30)
    assert "longer than the 1048576-byte bound" in str(e.value)


def test_a_trickling_index_page_is_bounded_in_time():
    with hostile() as srv:
        with pytest.raises(remote.RemoteError) as e:
            remote.get(f"{srv.url}/simple/trickle/", seconds=DEADLINE)
        settled(srv, "/simple/trickle/")
        assert "not read within its 2 s deadline" in str(e.value)
        assert srv.sent["/simple/trickle/"] <= DEADLINE / TRICKLE_GAP + 3
