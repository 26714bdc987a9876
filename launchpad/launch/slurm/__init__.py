"""launch_type='slurm': a program as one Slurm job.

Its placement is computed before submission (`placement.py`, from the cluster's hosts:
`inventory.py`); the job is submitted and watched while it pends (`job.py`), held by its
batch step (`job_holder.py`), and each host runs one step, its host agent (`agents.py`).
`detached.py` runs the controller inside the job. `settings.py` is `lp.SlurmSettings`.
"""
