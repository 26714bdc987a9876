"""The errors of the Kubernetes engine."""

from launchpad.launch.runtime.errors import LaunchError


class KubernetesError(LaunchError):
    """The Kubernetes API refused or lost part of the program's launch."""
