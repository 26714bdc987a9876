"""launch_type='kubernetes': a program as Kubernetes objects (`manifests.py`), its
controller in a pod of its own (`controller.py`), each node in a pod that reads its spec from
its volumes (`pod.py`). `settings.py` is `lp.KubernetesSettings`."""
