"""A module whose import raises, for `launchpad kubernetes-manifests`'s error tests."""

raise RuntimeError("this module refuses to be imported")
