"""The dev server's SIGINT/SIGTERM handling, without a process or a signal."""

import threading

import pytest

from devserver.__main__ import _Stop, _Stopper


def test_the_handler_only_records_a_stop_asked_for_during_the_start():
    """The handler used to raise from wherever the main thread was, a
    finalizer included, where Python prints the exception ("Exception ignored
    in ...") and carries on starting. It records the stop, and the start gives
    up at its next step."""
    stopper = _Stopper()
    stopper.check()  # nothing asked: the start goes on
    stopper.request()
    with pytest.raises(_Stop):
        stopper.check()


class _Server:
    def __init__(self) -> None:
        self.shut_down = threading.Event()

    def shutdown(self) -> None:
        self.shut_down.set()


def test_a_stop_once_serving_shuts_the_server_down_from_another_thread():
    stopper = _Stopper()
    server = _Server()
    stopper.serving(server)
    stopper.request()
    assert server.shut_down.wait(10)


def test_a_stop_asked_for_just_before_serving_still_shuts_the_server_down():
    stopper = _Stopper()
    stopper.request()
    server = _Server()
    stopper.serving(server)
    assert server.shut_down.wait(10)
