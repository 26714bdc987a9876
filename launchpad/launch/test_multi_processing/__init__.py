"""test_mp under Launchpad's path: `launch`, its launch function."""
