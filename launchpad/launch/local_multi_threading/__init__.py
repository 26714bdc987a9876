"""local_mt under Launchpad's path: `launch`, its launch function."""
