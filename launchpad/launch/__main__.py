"""`python -m launchpad.launch`: what launchers start on a node's host.

    python -m launchpad.launch --spec PATH     runs one node (node_process/runner.py); - reads
                                               stdin
    python -m launchpad.launch --pod-spec PATH runs the node of a Kubernetes pod, its spec and
                                               secret from the pod's volumes
                                               (kubernetes/pod.py)
    python -m launchpad.launch --standalone PATH
                                               runs one pickled node outside any launch (a
                                               MultiProcessingColocation's child, run by
                                               hand as Launchpad's tests do)
    python -m launchpad.launch --agent PATH    a host agent: the Slurm step that starts and
                                               watches its host's nodes
                                               (node_process/host_agent.py)
    python -m launchpad.launch --hold PATH     holds a cluster job for its program's controller
                                               (slurm/job_holder.py)
    python -m launchpad.launch --control PATH  a cluster job's batch step that is its program's
                                               controller (slurm/detached.py)
    python -m launchpad.launch --kubernetes-controller PATH
                                               a Kubernetes program's controller, in its
                                               own pod (kubernetes/controller.py)

A module of its own, so that neither is imported by the package before it runs.
"""

import argparse

parser = argparse.ArgumentParser(prog="python -m launchpad.launch",
                                 description="Runs a node of a launchpad program, or holds "
                                             "its cluster job.")
what = parser.add_mutually_exclusive_group(required=True)
what.add_argument("--spec", help="the node's spec: a private file, or - for stdin")
what.add_argument("--pod-spec", metavar="PATH",
                  help="the spec of a Kubernetes pod's node (mounted, sealed)")
what.add_argument("--standalone", metavar="PATH",
                  help="a pickled node (a private file), run outside any launch")
what.add_argument("--agent", help="a host agent's spec (a private file)")
what.add_argument("--hold", help="the job's holder file (a private file)")
what.add_argument("--control", help="the launch's spec, run as the job's controller")
what.add_argument("--kubernetes-controller", metavar="PATH",
                  help="the launch's spec (mounted, sealed), run as the program's controller")
args = parser.parse_args()
# Each imports only what it runs: a node's process, the runner (and then its node's code).
if args.spec:
    from launchpad.launch.node_process import runner

    runner.exit_process(runner.run_process(runner.read_spec(args.spec)))
elif args.pod_spec:
    from launchpad.launch.kubernetes import pod
    from launchpad.launch.node_process import runner

    runner.exit_process(runner.run_process(pod.read_node_spec(args.pod_spec)))
elif args.standalone:
    from launchpad.launch.node_process import runner

    runner.exit_process(runner.run_standalone(args.standalone))
elif args.agent:
    from launchpad.launch.node_process import host_agent

    raise SystemExit(host_agent.run(args.agent))
elif args.hold:
    from launchpad.launch.slurm import job_holder

    raise SystemExit(job_holder.hold(args.hold))
elif args.kubernetes_controller:
    from launchpad.launch.kubernetes import controller as kubernetes_controller

    raise SystemExit(kubernetes_controller.run(args.kubernetes_controller))
else:
    from launchpad.launch.slurm import detached as slurm_detached

    raise SystemExit(slurm_detached.run_controller(args.control))
