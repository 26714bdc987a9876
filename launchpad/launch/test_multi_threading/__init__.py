"""test_mt under Launchpad's paths: `launch` (its launch function) and `address_builder`
(addresses for nodes run outside any launch)."""
