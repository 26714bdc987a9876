"""The errors of the Slurm engine."""

from launchpad.launch.runtime.errors import LaunchError


class SlurmError(LaunchError):
    """Slurm refused or lost the program's job."""
