"""The launches a Kubernetes namespace holds, found by their controller's Job (its role
label): each running one as a run of `launchpad ls --namespace NS`, and whether a Job has
ended (its Complete or Failed condition)."""

from __future__ import annotations

from typing import Any

from launchpad.context import LaunchType
from launchpad.launch.kubernetes.api import Api, message_of
from launchpad.launch.kubernetes.names import LAUNCH_LABEL, NAME_ANNOTATION, ROLE_LABEL
from launchpad.launch.runtime.errors import LaunchError
from launchpad.launch.runtime.run_records import Run


def job_ended(job: Any) -> str:
    """'Complete' or 'Failed' once the Job has that condition; '' while it runs."""
    for condition in (job.status and job.status.conditions) or []:
        if condition.type in ("Complete", "Failed") and condition.status == "True":
            return condition.type
    return ""


def controller_jobs(api: Api, namespace: str, launch_id: str | None = None) -> list[Any]:
    """The controller Jobs of `namespace` (of launch `launch_id` only, if given)."""
    selector = f"{ROLE_LABEL}=controller" + (f",{LAUNCH_LABEL}={launch_id}" if launch_id
                                             else "")
    return api.batch.list_namespaced_job(namespace, label_selector=selector).items


def runs_in(namespace: str) -> list[Run]:
    """The launches running in `namespace` (their controller's Job has not ended), oldest
    first: id, program and start; they keep no record here, so nothing else is known.

    Raises:
      LaunchError: no cluster to reach, or it refused the listing (its reason named).
    """
    api = Api.connect()
    try:
        jobs = controller_jobs(api, namespace)
    except api.refused as e:
        raise LaunchError(f"Kubernetes refused to list the launches of namespace {namespace}: "
                          f"{message_of(e)}") from e
    runs = []
    for job in jobs:
        if job_ended(job):
            continue
        launch_id = job.metadata.labels[LAUNCH_LABEL]
        created = job.metadata.creation_timestamp
        runs.append(Run(run_id=launch_id,
                        program=(job.metadata.annotations or {}).get(NAME_ANNOTATION, launch_id),
                        launch_type=LaunchType.KUBERNETES.value,
                        started_at=created.timestamp() if created else 0.0,
                        controller_address="", token="", tls=None, folder=""))
    return sorted(runs, key=lambda run: run.started_at)
