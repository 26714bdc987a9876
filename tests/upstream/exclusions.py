"""What of Launchpad's own tests does not run here, and why: only tests that assert an
error's exact wording or need Launchpad's C++ internals (the issue's rule); each is covered
by a test of ours, named.

Every other `*_test.py` of the releases runs, every test case of it, unchanged
(test_upstream_tests.py checks that the releases hold exactly the files listed here and in
TEST_MODULES, so none is left out unseen).
"""

# Test files that do not run at all: file -> (why, what tests it here instead).
FILES = {
    "courier/python/client_test.py": (
        "imports pybind11_abseil.status.StatusNotOk, the error type of Launchpad's C++ "
        "courier (a compiled module of its stack), and asserts its messages; courier errors "
        "here keep the remote exception's own type",
        "tests/compat/test_courier_package.py"),
    "launchpad/launch/run_locally/decorate_output_test.py": (
        "runs `decorate_output`, a shell script of Launchpad's local launcher's internals "
        "(not Python, not in its API) that colours each line of a node's output",
        "tests/launch/test_launch.py (node output under current_terminal)"),
    "launchpad/launch/xm_docker/launch_test.py": (
        "asserts the wording of Google Cloud's refusal (a bucket that does not exist) of a "
        "vertex_ai launch through XManager; here vertex_ai is refused before anything is "
        "sent, naming the launch type that runs such a program",
        "tests/compat/test_launch_types.py"),
}

# Test cases skipped in files that run: release -> 'module' -> {'Class.method': why}.
TESTS: dict[str, dict[str, dict[str, str]]] = {
    "dm-launchpad-0.5.2": {
        "launchpad.launch.test_multi_processing.launch_test": {
            "LaunchTest.test_wait_for_some_detects_exception_in_any_node_group": (
                "asserts the wording of Launchpad's error ('One of the workers exited.'): "
                "here wait() raises lp.NodeFailedError, a RuntimeError too, naming the node, "
                "its exception and exit code, with its traceback (the same test of the last "
                "release asserts the type only, and passes; tests/compat/test_wait.py)"),
        },
    },
}

# Test cases Launchpad's own files skip (`@absltest.skip('base class')` on the mixin, which
# its subclass inherits): they are not run under Launchpad either. 'module' -> test ids.
SKIPPED_BY_LAUNCHPAD = {
    "launchpad.launch.serialization_test": {
        "ErrorOnSerializationMixin.test_raises_error_on_serialize_py_nodes",
        "ErrorOnSerializationMixin.test_serialize_py_nodes_is_false"},
    "launchpad.launch.test_multi_threading.launch_test": {
        "SerializationTest.test_raises_error_on_serialize_py_nodes",
        "SerializationTest.test_serialize_py_nodes_is_false"},
}
