"""Records on a socket pair: scatter-gather sends, small and large reads, the reader's bounds."""

from __future__ import annotations

import socket
import threading

import numpy as np
import pytest

from launchpad.courier._sockets import records

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def pair():
    left, right = socket.socketpair()
    yield left, right
    left.close()
    right.close()


def test_records_arrive_whole_and_in_order(pair):
    left, right = pair
    records.send_records(left, [(1, [b"hello", memoryview(b" world")]), (2, [b""])])
    reader = records.Reader(right, max_length=1 << 20)
    assert reader.read() == (1, b"hello world")
    assert reader.read() == (2, b"")


@pytest.mark.parametrize("as_bytes", [False, True], ids=["array", "bytes"])
def test_a_large_record_is_sent_in_pieces_and_read_into_its_own_read_only_buffer(pair,
                                                                                   as_bytes):
    left, right = pair
    array = np.arange(2 << 20, dtype=np.float32)  # 8 MiB: many partial sends
    part = array.tobytes() if as_bytes else array  # (bytes alone are sent without views)
    sender = threading.Thread(target=records.send, args=(left, 7, [b"head", part]))
    sender.start()
    kind, body = records.Reader(right, max_length=1 << 30).read()
    sender.join()
    assert kind == 7 and isinstance(body, memoryview) and body.readonly
    assert bytes(body[:4]) == b"head"
    np.testing.assert_array_equal(np.frombuffer(body[4:], np.float32), array)


def test_more_pieces_than_one_sendmsg_takes_are_sent(pair):
    left, right = pair
    pieces = [bytes([k % 256]) for k in range(3000)]
    sender = threading.Thread(target=records.send, args=(left, 1, pieces))
    sender.start()
    assert records.Reader(right, max_length=1 << 20).read() == (1, b"".join(pieces))
    sender.join()


def test_released_buffers_serve_other_readers_with_their_own_bytes():
    pairs = [socket.socketpair() for _ in range(records._MAX_SPARE_BUFFERS + 4)]
    try:
        readers = [records.Reader(right, max_length=1 << 20) for _, right in pairs]
        for rounds in range(3):
            for k, ((left, _), reader) in enumerate(zip(pairs, readers, strict=True)):
                records.send(left, 1, [f"round {rounds} reader {k}".encode()])
                records.send(left, 2, [b"next"])  # waits in the buffer: not released
                assert reader.read() == (1, f"round {rounds} reader {k}".encode())
                reader.release()
            for reader in readers:
                assert reader.read() == (2, b"next")
                reader.release()
            assert len(records._spare_buffers) <= records._MAX_SPARE_BUFFERS
    finally:
        for left, right in pairs:
            left.close()
            right.close()


def test_a_record_longer_than_allowed_is_refused(pair):
    left, right = pair
    records.send(left, 1, [b"x" * 100])
    with pytest.raises(ValueError, match="longer than the 10 bytes allowed"):
        records.Reader(right, max_length=10).read()


def test_a_peer_closing_inside_a_record_is_an_end_of_file(pair):
    left, right = pair
    left.sendall(b"\x01" + (1000).to_bytes(8, "little") + b"only part")
    left.close()
    with pytest.raises(EOFError):
        records.Reader(right, max_length=1 << 20).read()


@pytest.mark.parametrize("late", [False, True], ids=["within-the-spin", "after-it"])
def test_a_spinning_reader_gets_a_record_that_comes_during_or_after_its_spin(pair, late):
    left, right = pair
    reader = records.Reader(right, max_length=1 << 20)
    reader.spin_secs = 0.5 if not late else 1e-6
    sent = threading.Timer(0.05, records.send, args=(left, 3, [b"reply"]))
    sent.start()
    assert reader.read() == (3, b"reply")
    sent.join()
