"""Programs launched for real, one test body for every launch type (local_mt, test_mt,
local_mp, test_mp)."""

import dataclasses
import threading
import uuid

import numpy as np
import pytest

import launchpad as lp
from launchpad import courier
from tests.launch.helpers import TIMEOUT


class Producer:
    def work(self, x):
        return x * x


class Consumer:
    def __init__(self, producers, results):
        self._producers = producers
        self._results = results

    def run(self):
        futures = [p.futures.work(i) for i, p in enumerate(self._producers)]
        self._results.put(sum(f.result() for f in futures))
        lp.stop()


def test_consumer_producers(launch, box):
    results = box()
    program = lp.Program("consumer_producers")
    with program.group("producer"):
        producers = [program.add_node(lp.CourierNode(Producer)) for _ in range(4)]
    program.add_node(lp.CourierNode(Consumer, producers, results), label="consumer")
    controller = launch(program)
    assert controller.wait(timeout=TIMEOUT)
    assert results.get() == 0 + 1 + 4 + 9


class Echo:
    def echo(self, x):
        return x


def test_handle_dereferenced_in_the_launching_process_is_a_client(launch):
    program = lp.Program("p")
    handle = program.add_node(lp.CourierNode(Echo), label="echo")
    launch(program)
    client = handle.dereference()
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(client.echo(array), array)
    assert courier.list_methods(client) == ["echo"]


@dataclasses.dataclass
class Wiring:
    echo: object
    named: dict


def _use_nested_handles(wiring, pair, results):
    results.put((wiring.echo.echo(1), wiring.named["e"].echo(2), pair[1].echo(3)))


def test_handles_nested_in_arguments_become_clients(launch, box):
    results = box()
    program = lp.Program("p")
    echo = program.add_node(lp.CourierNode(Echo), label="echo")
    program.add_node(lp.PyNode(_use_nested_handles, Wiring(echo, {"e": echo}), (0, echo),
                               results), label="user")
    launch(program)
    assert results.get() == (1, 2, 3)


class Ping:
    def __init__(self, peer=None):
        self._peer = peer

    def ping(self, n):
        return n if n == 0 else self._peer.ping(n - 1)


def test_nodes_holding_each_others_handles(launch):
    program = lp.Program("cycle")
    a, b = lp.CourierNode(Ping), lp.CourierNode(Ping)
    handle_a = program.add_node(a, label="a")
    handle_b = program.add_node(b, label="b")
    a.configure(handle_b)
    b.configure(handle_a)
    launch(program)
    assert handle_a.dereference().ping(5) == 0


class RunsOnce:
    def __init__(self, results):
        self._results = results

    def value(self):
        return 7

    def run(self):
        self._results.put("ran")


def test_courier_server_stops_when_run_returns(launch, box):
    results = box()
    program = lp.Program("p")
    handle = program.add_node(lp.CourierNode(RunsOnce, results,
                                             courier_client_kwargs={"connect_timeout": 1}),
                              label="once")
    program.add_node(lp.CourierNode(Echo), label="keeps_program_alive")
    controller = launch(program)
    assert results.get() == "ran"
    assert controller.wait_for_node("once/0", TIMEOUT)
    with pytest.raises(lp.NodeEndedError, match="once/0"):
        handle.dereference().value()
    assert not controller.wait(timeout=0)


class Gate:
    """Its run() returns because of a call: that call's reply must still arrive."""

    def __init__(self):
        self._opened = threading.Event()

    def open(self):
        self._opened.set()
        return "opened"

    def run(self):
        self._opened.wait(TIMEOUT)


def test_the_call_that_ends_a_node_still_gets_its_reply(launch, request):
    # The reply raced the server's stop before stops drained calls: tried many times where a
    # launch is cheap (threads), fewer where each is a set of processes or a cluster job.
    threads = request.node.callspec.params["launch"].endswith("_mt")
    for attempt in range(20 if threads else 5):
        program = lp.Program(f"gate_{attempt}")
        gate = program.add_node(lp.CourierNode(Gate), label="gate")
        controller = launch(program)
        assert gate.dereference().open() == "opened"
        assert controller.wait(timeout=TIMEOUT)


def test_courier_node_without_run_serves_until_stop(launch):
    program = lp.Program("p")
    handle = program.add_node(lp.CourierNode(Echo), label="echo")
    controller = launch(program)
    assert handle.dereference().echo("still here") == "still here"
    assert not controller.wait(timeout=0)
    lp.stop()  # from the launching process
    assert controller.wait(timeout=TIMEOUT)


class AddressOwner:
    def __init__(self, address, results):
        self._address = address
        self._results = results

    def run(self):
        self._results.put(self._address.resolve())
        lp.wait_for_stop()  # the address is the node's only while the node runs


def _report_peer_address(address, results):
    results.put(address.resolve(timeout=TIMEOUT))


def test_allocated_address_resolves_to_the_same_port_everywhere(launch, box):
    own, peer = box(), box()
    program = lp.Program("addresses")
    server = lp.PyClassNode(AddressOwner)
    web = server.allocate_address("web")
    server.configure(web, own)
    program.add_node(server, label="server")
    program.add_node(lp.PyNode(_report_peer_address, web, peer), label="peer")
    launch(program)
    address = own.get()
    assert address == peer.get() == web.resolve(timeout=TIMEOUT)
    assert lp.get_port_from_address(address) > 0


def test_allocating_the_same_address_name_twice_is_an_error():
    node = lp.PyNode(print)
    node.allocate_address("web")
    with pytest.raises(ValueError, match="already has an address named 'web'"):
        node.allocate_address("web")


def _finish(results, i):
    results.put(i)


def test_program_ends_when_every_node_has_finished(launch, box):
    results = box()
    program = lp.Program("p")
    with program.group("worker"):
        for i in range(3):
            program.add_node(lp.PyNode(_finish, results, i))
    controller = launch(program)
    assert controller.wait(timeout=TIMEOUT)
    assert sorted(results.get() for _ in range(3)) == [0, 1, 2]  # each ran, then it ended


def _raise_in_run():
    raise KeyError("boom in run")


class FailsInConstructor:
    def __init__(self):
        raise ValueError("boom in constructor")


@pytest.mark.parametrize("make_node, expected", [
    (lambda: lp.PyNode(_raise_in_run), "KeyError: 'boom in run'"),
    (lambda: lp.CourierNode(FailsInConstructor), "ValueError: boom in constructor"),
])
def test_failing_node_stops_the_program_and_is_named(make_node, expected, launch_local):
    program = lp.Program("failing")
    program.add_node(make_node(), label="bad")
    program.add_node(lp.CourierNode(Echo), label="server")
    controller = launch_local(program)
    with pytest.raises(lp.NodeFailedError, match="bad/0") as info:
        controller.wait(timeout=TIMEOUT)
    assert info.value.node == "bad/0" and expected in info.value.reason
    assert expected in info.value.node_traceback
    assert type(info.value.node_exception).__name__ == expected.split(":")[0]
    with pytest.raises(lp.NodeFailedError):  # every later wait says the same
        controller.wait(timeout=TIMEOUT)
    assert controller.exit_codes()["bad/0"] == 1


@pytest.mark.parametrize("launch_type", ["test_mt", "test_mp"])
def test_a_node_failure_fails_the_test_under_test_launchers(launch_type, no_leaked_threads,
                                                             no_leaked_processes):
    import unittest

    class Case(unittest.TestCase):
        def runTest(self):
            program = lp.Program("in_test")
            program.add_node(lp.PyNode(_raise_in_run), label="bad")
            program.add_node(lp.CourierNode(Echo), label="server")
            controller = lp.launch(program, launch_type=launch_type, test_case=self)
            # Let the node end first; the cleanup the launcher added must report the failure.
            assert controller.wait_for_node("bad/0", TIMEOUT)

    result = unittest.TestResult()
    Case().run(result)
    assert len(result.errors) == 1
    assert "NodeFailedError" in result.errors[0][1] and "bad/0" in result.errors[0][1]


@pytest.mark.parametrize("launch_type", ["test_mt", "test_mp"])
def test_a_failure_a_wait_raised_to_the_test_does_not_fail_it_again(
        launch_type, no_leaked_threads, no_leaked_processes):
    import unittest

    class Case(unittest.TestCase):
        def runTest(self):
            program = lp.Program("in_test")
            program.add_node(lp.PyNode(_raise_in_run), label="bad")
            controller = lp.launch(program, launch_type=launch_type, test_case=self)
            with self.assertRaisesRegex(KeyError, "boom in run"):  # the node's own type
                controller.wait(timeout=TIMEOUT)

    result = unittest.TestResult()
    Case().run(result)
    assert result.wasSuccessful(), result.errors + result.failures


class StopWatcher:
    """Records what the stop API reports, from the node's thread and from its own thread."""

    def __init__(self, results):
        self._results = results

    def run(self):
        seen = {"before": lp.wait_for_stop(0.01)}
        handler_ran = threading.Event()
        lp.register_stop_handler(handler_ran.set)
        removed = threading.Event()
        lp.register_stop_handler(removed.set)
        lp.unregister_stop_handler(removed.set)
        stopper = threading.Thread(target=lp.stop)  # a thread of the node's own making
        stopper.start()
        stopper.join()
        seen["after"] = lp.wait_for_stop(TIMEOUT)
        seen["event"] = lp.stop_event().is_set()
        seen["handler"] = handler_ran.wait(TIMEOUT)
        seen["removed_handler_ran"] = removed.is_set()
        late = threading.Event()
        lp.register_stop_handler(late.set)  # registered after the stop: runs at once
        seen["late_handler"] = late.is_set()
        self._results.put(seen)


def test_stop_api_from_a_node_and_from_its_threads(launch, box):
    results = box()
    program = lp.Program("stopping")
    program.add_node(lp.PyClassNode(StopWatcher, results), label="watcher")
    controller = launch(program)
    assert controller.wait(timeout=TIMEOUT)
    assert results.get() == {"before": False, "after": True, "event": True, "handler": True,
                             "removed_handler_ran": False, "late_handler": True}


def test_unregistering_an_unknown_handler_is_an_error(launch):
    program = lp.Program("p")
    program.add_node(lp.CourierNode(Echo), label="echo")
    launch(program)
    with pytest.raises(ValueError, match="not a registered stop handler"):
        lp.unregister_stop_handler(print)


def test_stop_api_outside_any_program_says_where_it_works():
    with pytest.raises(RuntimeError, match="No launchpad program is running"):
        lp.stop()


def test_two_programs_in_one_process_do_not_interfere(launch):
    first, second = lp.Program("first"), lp.Program("second")
    handle_1 = first.add_node(lp.CourierNode(Echo), label="echo")
    handle_2 = second.add_node(lp.CourierNode(Echo), label="echo")
    controller_1, controller_2 = launch(first), launch(second)
    with pytest.raises(RuntimeError, match="Several programs"):
        lp.stop()
    controller_1.stop()
    assert controller_1.wait(timeout=TIMEOUT)
    assert handle_2.dereference().echo(2) == 2 and not controller_2.wait(timeout=0)
    # The first program's controller is gone; its port may be another server's by now (of
    # another program, which refuses this program's token): either way nothing answers.
    with pytest.raises((courier.ServerUnavailableError, courier.PermissionDeniedError)):
        handle_1.dereference().echo(1)


def test_client_of_another_launch_is_refused(launch):
    program = lp.Program("p")
    handle = program.add_node(lp.CourierNode(Echo), label="echo")
    launch(program)
    client = handle.dereference()
    client.echo(0)
    intruder = courier.Client(client.address, token="not-the-token")
    with pytest.raises(courier.PermissionDeniedError):
        intruder.echo(1)
    courier.close(intruder)


def test_wait_with_timeout_returns_false_while_running_and_context_manager_stops(launch):
    program = lp.Program("p")
    program.add_node(lp.CourierNode(Echo), label="echo")
    with launch(program) as controller:
        assert controller.wait(timeout=0.05) is False
    assert controller.wait(timeout=0)


class Blocker:
    """A node that ignores the stop event until the test releases it."""

    release = threading.Event()

    def run(self):
        self.release.wait(TIMEOUT)


def test_node_ignoring_stop_does_not_block_wait_past_the_grace_period(no_leaked_threads):
    program = lp.Program("stubborn")
    program.add_node(lp.PyClassNode(Blocker), label="blocker")
    controller = lp.launch(program, launch_type="local_mt", termination_notice_secs=0.2)
    controller.stop()
    try:
        assert controller.wait(timeout=TIMEOUT)
    finally:
        Blocker.release.set()


def _finish_a_call_after_the_stop():
    lp.wait_for_stop()
    threading.Event().wait(1.0)  # a call with a timeout of its own, ending past the grace


def test_a_thread_ending_just_past_the_grace_period_is_waited_for(caplog, no_leaked_threads):
    program = lp.Program("late")
    program.add_node(lp.PyNode(_finish_a_call_after_the_stop), label="late")
    controller = lp.launch(program, launch_type="local_mt", termination_notice_secs=0.2)
    controller.stop()
    assert controller.wait(timeout=TIMEOUT)
    assert controller.exit_codes() == {"late/0": 0}
    assert "left behind" not in caplog.text


def test_launch_type_from_the_command_line_flag(monkeypatch, no_leaked_threads,
                                                no_leaked_processes):
    # Not the default (local_mt): a launch that ignored the flag would run local_mt.
    monkeypatch.setattr("sys.argv", ["prog", "--lp_launch_type=local_mp", "--other=1"])
    program = lp.Program("p")
    program.add_node(lp.PyNode(int), label="noop")
    controller = lp.launch(program)
    assert controller.launch_type == "local_mp"
    assert controller.wait(timeout=TIMEOUT)
    assert list(controller.pids()) == ["noop/0"]  # a process of its own


@pytest.mark.parametrize("kwargs, message", [
    ({"launch_type": "nope"}, "Unknown launch_type 'nope'"),
    ({"launch_type": "test_mp"}, "needs test_case="),
    ({"launch_type": "local_mt", "startup_timeout_secs": 0}, "startup_timeout_secs must be"),
])
def test_bad_launch_arguments_are_named(kwargs, message):
    program = lp.Program("p")
    program.add_node(lp.PyNode(int), label="noop")
    with pytest.raises(ValueError, match=message):
        lp.launch(program, **kwargs)


def test_a_pods_start_is_timed_by_the_kubernetes_settings_not_the_launch():
    from launchpad.launch import launchers
    from launchpad.launch import options as launch_options
    kubernetes = launchers.get("kubernetes")
    with pytest.raises(ValueError, match=r"KubernetesSettings\(startup_timeout_secs="):
        launch_options.resolve(kubernetes, 1, startup_timeout_secs=60.0)
    clocks = launch_options.resolve(kubernetes, 1).clocks
    assert "startup_timeout_secs" not in clocks.controller_arguments()


def test_an_empty_program_cannot_be_launched():
    with pytest.raises(ValueError, match="has no nodes"):
        lp.launch(lp.Program("empty"), launch_type="local_mt")


def test_unpicklable_node_is_named_under_test_mt(request):
    program = lp.Program("p")
    program.add_node(lp.PyNode(print, threading.Lock()), label="locked")
    with pytest.raises(ValueError, match="label 'locked' were not serializable with "
                                         "cloudpickle: node locked/0 cannot be pickled"):
        lp.launch(program, launch_type="test_mt", test_case=request)


def test_a_running_program_cannot_be_launched_twice(launch):
    program = lp.Program("p")
    program.add_node(lp.CourierNode(Echo), label="echo")
    launch(program)
    with pytest.raises(ValueError, match="already running"):
        lp.launch(program, launch_type="local_mt")


class RunRecorder:
    def __init__(self, results):
        self._results = results

    def run(self):
        self._results.put("ran")


def test_disable_run_builds_without_running_and_enable_run_restores_it(launch, box):
    skipped, ran = box(), box()
    program = lp.Program("run_switch")
    quiet = lp.PyClassNode(RunRecorder, skipped)
    quiet.disable_run()
    loud = lp.PyClassNode(RunRecorder, ran)
    loud.disable_run()
    loud.enable_run()
    program.add_node(quiet, label="quiet")
    program.add_node(loud, label="loud")
    assert launch(program).wait(timeout=TIMEOUT)
    assert ran.get() == "ran"
    assert skipped.empty()  # the program ended; run() never put


def _fail_until_third_attempt(attempts_file, results):
    with open(attempts_file, "a") as f:
        f.write("attempt\n")
    attempts = len(open(attempts_file).read().split())
    if attempts < 3:
        raise RuntimeError(f"attempt {attempts} fails")
    results.put(attempts)


def test_restart_policy_restarts_a_failing_node_until_it_succeeds(launch, box, tmp_path):
    results = box()
    program = lp.Program("flaky")
    with program.group("flaky", restart=lp.RestartPolicy(max_restarts=3, backoff_secs=0.01)):
        program.add_node(lp.PyNode(_fail_until_third_attempt, str(tmp_path / "n"), results))
    controller = launch(program)
    assert controller.wait(timeout=TIMEOUT)
    assert results.get() == 3
    assert controller.restarts() == {"flaky/0": 2}


def test_a_node_failing_more_often_than_its_policy_allows_fails_the_program(
        launch_local, tmp_path):
    program = lp.Program("flaky")
    with program.group("flaky", restart=lp.RestartPolicy(max_restarts=1, backoff_secs=0.01)):
        program.add_node(lp.PyNode(_fail_until_third_attempt, str(tmp_path / "n"), None))
    controller = launch_local(program)
    with pytest.raises(lp.NodeFailedError, match=r"failed \(after 1 restart\)") as failed:
        controller.wait(timeout=TIMEOUT)
    assert "attempt 2 fails" in str(failed.value) and failed.value.restarts == 1


class Crashy:
    """Serves until asked to crash; reports every start."""

    def __init__(self, starts):
        self._crash = threading.Event()
        self._ident = uuid.uuid4().hex
        starts.put(self._ident)

    def ident(self):
        return self._ident

    def crash(self):
        self._crash.set()

    def run(self):
        lp.register_stop_handler(self._crash.set)
        self._crash.wait()
        if not lp.stop_event().is_set():
            raise RuntimeError("crashed on request")


def test_clients_reach_a_restarted_node_by_themselves(launch, box):
    starts = box()
    program = lp.Program("restarting")
    with program.group("crashy", restart=lp.RestartPolicy(max_restarts=1, backoff_secs=0.01)):
        handle = program.add_node(lp.CourierNode(Crashy, starts))
    launch(program)
    client = handle.dereference()
    first = starts.get()
    assert client.ident() == first
    client.crash()
    second = starts.get()  # the node was built again
    assert second != first
    assert client.ident() == second  # the same client, reconnected to the new node



def test_calls_take_the_fastest_transport_and_a_handle_may_force_grpc(launch, request):
    program = lp.Program("transports")
    fast = program.add_node(lp.CourierNode(Echo), label="fast")
    forced = program.add_node(
        lp.CourierNode(Echo, courier_client_kwargs={"transport": "grpc"}), label="forced")
    launch(program)
    fast_client, forced_client = fast.dereference(), forced.dereference()
    assert fast_client.echo(1) == 1 and forced_client.echo(2) == 2
    assert courier.transport_of(forced_client) == "grpc"
    fastest = {"local_mt": "in-process", "test_mt": "in-process", "local_mp": "local",
               "test_mp": "local"}.get(request.node.callspec.params["launch"])
    if lp.courier.transport_mode(None) == "grpc":  # forced for the whole run
        fastest = "grpc"
    if fastest is not None:  # (on a cluster, it depends on where the node was placed)
        assert courier.transport_of(fast_client) == fastest
    if fastest in ("in-process", "local"):  # every client is of this host: its server has
        stranger = courier.Client(fast_client.address, transport="grpc", connect_timeout=1.0)
        try:  # no gRPC (refused at once), where the forced node's has
            with pytest.raises(courier.ServerUnavailableError):
                stranger.echo(3)
        finally:
            courier.close(stranger)


def test_every_argument_of_launch_is_documented_once_by_the_options_schema():
    import inspect

    from launchpad.launch import launchers
    parameters = inspect.signature(lp.launch).parameters.values()
    named = [p.name for p in parameters if p.kind is not p.VAR_KEYWORD]
    for name in named + list(launchers.settings()):  # (**engine_settings: each engine's)
        assert lp.launch.__doc__.count(f"\n  {name}: ") == 1, name
    assert lp.launch.__doc__.index("\nArgs:") < lp.launch.__doc__.index("\nRaises:")
