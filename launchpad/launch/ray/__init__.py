"""launch_type='ray': each node a Ray actor running the node runner (`node.py`), on the
cluster `connection.py` joins or starts; `detached.py` runs the controller in a detached
actor. `settings.py` is `lp.RaySettings`."""
