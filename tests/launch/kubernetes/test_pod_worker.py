"""The controller's pod knows each node's pod only through the node's reports: how a
`PodWorker` follows runs, including a pod that Kubernetes re-ran before the supervisor asked
for the restart (its clock is not the supervisor's)."""

from __future__ import annotations

import pytest

from launchpad.launch.kubernetes.pod_worker import PodWorker

pytestmark = pytest.mark.usefixtures("no_leaked_threads")


def _worker(startup_timeout: float = 30.0) -> tuple[PodWorker, list[tuple[int, int | None]]]:
    ended: list[tuple[int, int | None]] = []
    worker = PodWorker("actor/0", startup_timeout,
                       lambda w: ended.append((w.attempt, w.returncode)))
    return worker, ended


def test_a_run_ends_when_its_node_reports_and_the_next_pod_is_followed_after_restart():
    worker, ended = _worker()
    worker.start()
    worker.run_started("first")
    assert not worker.join(0)
    worker.run_reported("first", finished=False)
    assert worker.join(0) and ended == [(0, 1)]
    assert "pod of attempt 1: its node raised" == worker.describe_end()
    worker.restart()
    assert not worker.join(0) and worker.attempt == 1
    worker.run_started("second")
    worker.run_reported("first", finished=True)  # a report of the old run changes nothing
    assert not worker.join(0)
    worker.run_reported("second", finished=True)
    assert ended == [(0, 1), (1, 0)]
    assert not worker.terminate()  # pods are Kubernetes' to end


def test_a_pod_rerun_before_the_restart_is_taken_as_the_restarts_run():
    worker, ended = _worker()
    worker.start()
    worker.run_started("first")
    worker.run_reported("first", finished=False)
    worker.run_started("second")  # Kubernetes re-ran the pod at once...
    worker.run_reported("second", finished=True)  # ...and it finished, all before restart()
    assert ended == [(0, 1)]
    worker.restart()
    assert worker.join(0) and ended == [(0, 1), (1, 0)]


def test_a_pod_that_does_not_start_in_time_ends_its_run_named():
    worker, ended = _worker(startup_timeout=0.05)
    worker.start()
    assert worker.join(10) and ended == [(0, 1)]
    assert "did not start within 0.05s" in worker.describe_end()


def test_kill_ends_a_run_given_up_without_reporting_it_again():
    worker, ended = _worker()
    worker.start()
    worker.run_started("first")
    worker.kill()
    assert worker.join(0) and ended == [] and worker.returncode is None
    worker.restart()
    worker.kill()


def test_a_lost_run_is_run_again_on_new_objects_and_a_failed_one_is_not():
    ended: list[tuple[int, int | None]] = []
    rerun: list[str] = []
    worker = PodWorker("actor/0", 30.0, lambda w: ended.append((w.attempt, w.returncode)),
                       rerun=rerun.append)
    worker.start()
    worker.run_started("first")
    worker.run_reported("first", finished=False)  # it raised: Kubernetes re-runs its pod
    worker.restart()
    assert rerun == []
    worker.run_started("second")
    worker.kill()  # lost: its pod silent
    worker.run_started("third")  # a pod of the old Job, started meanwhile: not the new one's
    worker.restart()
    assert rerun == ["actor/0"] and not worker.join(0)
    worker.run_reported("third", finished=True)
    assert not worker.join(0)
    worker.run_started("fourth")  # the new Job's pod
    worker.run_reported("fourth", finished=True)
    assert worker.join(0) and ended == [(0, 1), (2, 0)]
