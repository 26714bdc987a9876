"""A node's traceback shortened to the user's frames (runtime/traceback_text.py)."""

from __future__ import annotations

import os

import launchpad
from launchpad.launch.runtime import traceback_text

OURS = os.path.dirname(os.path.abspath(launchpad.__file__))
SPACE = " "  # Python ends "RemoteTraceback: " with one (its message starts with a newline)

REMOTE_USER_ERROR = f'''\
launchpad.courier.errors.RemoteTraceback:{SPACE}
"""
Traceback (most recent call last):
  File "{OURS}/courier/_serving/method_calls.py", line 104, in _handle
    result = self._invoke(frame.name)
             ^^^^^^^^^^^^^^^^^^^^^^^^
  File "/home/user/agent.py", line 30, in update
    raise KeyError("step")
KeyError: 'step'
"""

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "{OURS}/nodes/running.py", line 98, in run_in_context
    node.run()
  File "/home/user/agent.py", line 12, in run
    self._learner.update()
  File "/usr/lib/python3/site-packages/launchpad/courier/client.py", line 143, in _call
    drive=True).result()
KeyError: 'step'
'''


def test_our_frames_go_and_the_users_stay_with_their_source_lines():
    short, hidden = traceback_text.shorten(REMOTE_USER_ERROR)
    assert hidden
    assert short == f'''\
launchpad.courier.errors.RemoteTraceback:{SPACE}
"""
Traceback (most recent call last):
  File "/home/user/agent.py", line 30, in update
    raise KeyError("step")
KeyError: 'step'
"""

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/home/user/agent.py", line 12, in run
    self._learner.update()
KeyError: 'step\''''


def test_a_cause_that_was_only_our_frames_goes_with_its_separator():
    text = ('ValueError: inner\n\nDuring handling of the above exception, another exception '
            'occurred:\n\nTraceback (most recent call last):\n  File "/u/a.py", line 3, in f\n'
            '    g()\nKeyError: outer\n')
    ours = text.replace("ValueError: inner", "Traceback (most recent call last):\n"
                        f'  File "{OURS}/x.py", line 1, in h\n    h()\nValueError: inner')
    short, hidden = traceback_text.shorten(ours)
    assert hidden and short.startswith("Traceback (most recent call last):\n  File \"/u/a.py\"")
    assert "inner" not in short
    kept, hidden = traceback_text.shorten(text)  # a cause without frames of ours stays
    assert not hidden and kept == text.rstrip("\n")
    assert "During handling of the above exception" in kept


def test_verbose_keeps_everything(monkeypatch):
    monkeypatch.setenv(traceback_text.VERBOSE_VARIABLE, "1")
    assert traceback_text.shorten(REMOTE_USER_ERROR) == (REMOTE_USER_ERROR, False)
    monkeypatch.setenv(traceback_text.VERBOSE_VARIABLE, "0")
    assert traceback_text.shorten(REMOTE_USER_ERROR)[1]


def test_a_user_folder_named_launchpad_is_not_ours():
    assert not traceback_text.is_ours("/home/user/launchpad/train.py")
    assert traceback_text.is_ours(f"{OURS}/launch/launch.py")
    assert traceback_text.is_ours("/opt/venv/lib/python3.12/site-packages/launchpad/x.py")
