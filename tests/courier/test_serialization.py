"""Wire format: frames with out-of-band buffers, argument naming, and exception rebuilding."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from launchpad.courier import errors
from launchpad.courier._wire import serialization
from launchpad.courier._wire.serialization import Kind


def _message(*frames: serialization.OutFrame) -> bytes:
    return serialization.join_message(list(frames))


class TwoArgError(Exception):
    def __init__(self, left, right):
        super().__init__(f"{left} and {right}")


def _raise(exc: BaseException) -> BaseException:
    """Returns `exc` after raising it, so it carries a traceback."""
    try:
        raise exc
    except BaseException as e:  # noqa: BLE001
        return e


def test_dumps_puts_array_data_out_of_band():
    array = np.arange(1000, dtype=np.float64)
    parts = serialization.dumps({"array": array, "n": 3})
    assert len(parts) == 2
    assert memoryview(parts[1]).nbytes == array.nbytes
    assert len(parts[0]) < array.nbytes  # the pickle itself holds no array data


def test_several_frames_with_buffers_round_trip_in_one_message():
    first = np.arange(12, dtype=np.int32).reshape(3, 4)
    second = np.linspace(0, 1, 5, dtype=np.float32)
    message = _message(
        serialization.encode_frame(Kind.CALL, 7, "method_a", serialization.dumps(((first,), {}))),
        serialization.encode_frame(Kind.RESULT, 8, "", serialization.dumps("plain")),
        serialization.encode_frame(Kind.CALL, 2**40, "méthode", serialization.dumps(
            ((), {"x": second, "y": [first, second]}))),
        serialization.encode_frame(Kind.ERROR, 9, "", serialization.dumps(None)),
    )
    frames = serialization.decode_message(message)
    assert [(f.kind, f.call_id, f.name) for f in frames] == [
        (Kind.CALL, 7, "method_a"), (Kind.RESULT, 8, ""), (Kind.CALL, 2**40, "méthode"),
        (Kind.ERROR, 9, "")]
    # `second` appears twice in the third frame but travels once (the pickle memoises it).
    assert [len(f.buffers) for f in frames] == [1, 0, 2, 0]
    args, kwargs = frames[0].load()
    np.testing.assert_array_equal(args[0], first)
    assert kwargs == {}
    assert frames[1].load() == "plain"
    args, kwargs = frames[2].load()
    np.testing.assert_array_equal(kwargs["x"], second)
    np.testing.assert_array_equal(kwargs["y"][0], first)
    np.testing.assert_array_equal(kwargs["y"][1], second)
    assert frames[3].load() is None


def test_an_empty_message_is_malformed():
    with pytest.raises(ValueError, match="at least one frame"):
        serialization.decode_message(b"")


def test_decoded_arrays_are_read_only_views_of_the_message():
    array = np.arange(16, dtype=np.float32)
    message = _message(serialization.encode_frame(Kind.RESULT, 1, "",
                                                  serialization.dumps(array)))
    decoded = serialization.decode_message(message)[0].load()
    np.testing.assert_array_equal(decoded, array)
    assert not decoded.flags.writeable
    assert not decoded.flags.owndata  # no copy: it views the received bytes
    with pytest.raises(ValueError):
        decoded[0] = 1.0
    writable = decoded.copy()
    writable[0] = 1.0
    assert writable[0] == 1.0


def test_decoding_a_message_with_an_unknown_kind_raises_value_error():
    frame = serialization.encode_frame(Kind.CALL, 1, "m", serialization.dumps(None))
    message = bytearray(_message(frame))
    message[0] = 99
    with pytest.raises(ValueError):
        serialization.decode_message(bytes(message))


def test_dumps_call_arguments_names_the_unpicklable_positional_argument():
    with pytest.raises(errors.SerializationError) as info:
        serialization.dumps_call_arguments("update", (1, threading.Lock()), {})
    message = str(info.value)
    assert "'update'" in message
    assert "positional argument 1" in message
    assert "lock" in message
    assert isinstance(info.value, TypeError)


def test_dumps_call_arguments_names_the_unpicklable_keyword_argument():
    with pytest.raises(errors.SerializationError, match="keyword argument 'state'"):
        serialization.dumps_call_arguments("update", (1,), {"state": threading.Lock()})


def test_lambda_pickles_by_value():
    parts = serialization.dumps(lambda x: x + 1)
    message = _message(serialization.encode_frame(Kind.RESULT, 1, "", parts))
    assert serialization.decode_message(message)[0].load()(1) == 2


def _exception_frame(exc: BaseException) -> serialization.Frame:
    parts = serialization.dumps_exception(exc)
    return serialization.decode_message(_message(
        serialization.encode_frame(Kind.ERROR, 1, "", parts)))[0]


def test_load_exception_rebuilds_the_type_with_the_traceback_as_cause():
    rebuilt = serialization.load_exception(_exception_frame(_raise(KeyError("k"))))
    assert type(rebuilt) is KeyError
    assert rebuilt.args == ("k",)
    assert isinstance(rebuilt.__cause__, errors.RemoteTraceback)
    assert "_raise" in rebuilt.__cause__.traceback_text


def test_load_exception_falls_back_to_remote_error_for_an_unrebuildable_type():
    rebuilt = serialization.load_exception(_exception_frame(_raise(TwoArgError("a", "b"))))
    assert isinstance(rebuilt, errors.RemoteError)
    assert rebuilt.type_name == f"{__name__}.TwoArgError"
    assert rebuilt.message == "a and b"
    assert "_raise" in rebuilt.remote_traceback
    assert isinstance(rebuilt.__cause__, errors.RemoteTraceback)


def test_courier_errors_survive_pickling():
    for exc in (errors.UnknownMethodError("m", ["a", "b"], "host:1"),
                errors.RemoteError("pkg.Error", "message", "traceback text")):
        rebuilt = serialization.load_exception(_exception_frame(exc))
        assert type(rebuilt) is type(exc)
        assert str(rebuilt) == str(exc)


def test_objects_of_main_module_classes_travel_by_value_to_another_process(monkeypatch):
    """Plain pickle would refer to `__main__.Point`, which the receiving process (whose
    `__main__` is another script) does not have; the fallback to cloudpickle sends the class."""
    import subprocess
    import sys

    point_class = type("Point", (), {"__module__": "__main__", "x": 3})
    monkeypatch.setattr(sys.modules["__main__"], "Point", point_class, raising=False)
    data, *buffers = serialization.dumps(point_class())
    assert not buffers
    load_and_print_x = "import pickle, sys; print(pickle.loads(sys.stdin.buffer.read()).x)"
    loaded = subprocess.run([sys.executable, "-c", load_and_print_x], input=bytes(data),
                            capture_output=True, timeout=60)
    assert loaded.returncode == 0, loaded.stderr.decode()
    assert loaded.stdout.strip() == b"3"
