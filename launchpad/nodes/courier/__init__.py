"""Nodes served over courier (Launchpad's package): `node` (CourierNode, CourierHandle,
CourierClient), `courier_utils` (batched_handler, make_courier_server)."""
