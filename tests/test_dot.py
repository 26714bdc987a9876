"""Pictures of programs: the edges handles make, shapes, clusters, nesting, escaping, collapsing
(`Program.to_dot`), read back by Graphviz's own `dot`, and files drawn by `lp.render_program`."""

import collections
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import pytest

import launchpad as lp
from launchpad import dot

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SVG = "{http://www.w3.org/2000/svg}"


class Server:
    def ping(self):
        return "pong"


def work(*args, **kwargs):
    return None


def rest(*args, **kwargs):
    return None


Pair = collections.namedtuple("Pair", "left right")


@dataclasses.dataclass
class Settings:
    source: object


@pytest.fixture(scope="module", autouse=True)
def graphviz_dot():
    assert shutil.which("dot"), "these tests need Graphviz's dot: make system-packages"


def _layout(program, **options) -> dict:
    """The picture as Graphviz reads it: clusters (name -> label, nodes, clusters inside),
    nodes (name -> attributes) and edges (tail, head)."""
    text = subprocess.run(["dot", "-Tjson"], input=program.to_dot(**options),
                          capture_output=True, text=True, check=True, timeout=60).stdout
    graph = json.loads(text)
    objects = graph.get("objects", [])
    names = {o["_gvid"]: o["name"] for o in objects}
    clusters = {o["name"]: {"label": o.get("label"), "nodes": {names[n] for n in o["nodes"]},
                            "clusters": {names[s] for s in o.get("subgraphs", [])}}
                for o in objects if o["name"].startswith("cluster")}
    nodes = {o["name"]: o for o in objects if not o["name"].startswith("cluster")}
    edges = {(names[e["tail"]], names[e["head"]]) for e in graph.get("edges", [])}
    return {"clusters": clusters, "nodes": nodes, "edges": edges}


def _edges(program, **options) -> set:
    return _layout(program, **options)["edges"]


def _server(program, label="server"):
    return program.add_node(lp.CourierNode(Server), label=label)


# --- edges: every way a node receives a handle ---------------------------------------------


@pytest.mark.parametrize("wrap", [
    lambda h: ((h,), {}),
    lambda h: ((), {"server": h}),
    lambda h: (([h],), {}),
    lambda h: (((1, h),), {}),
    lambda h: (({"a": {"b": h}},), {}),
    lambda h: (({h},), {}),
    lambda h: ((Pair(h, 2),), {}),
    lambda h: ((Settings(h),), {}),
    lambda h: ((lp.Deferred(dict, h),), {}),
    lambda h: ((), {"made": lp.Deferred(dict, inner=lp.Deferred(list, [h]))}),
], ids=["positional", "keyword", "list", "tuple", "dict", "set", "namedtuple", "dataclass",
        "deferred", "nested-deferred"])
@pytest.mark.parametrize("node_type", [lp.PyNode, lp.PyClassNode, lp.CourierNode])
def test_a_handle_anywhere_in_the_arguments_is_an_edge(wrap, node_type):
    program = lp.Program("p")
    server = _server(program)
    args, kwargs = wrap(server)
    program.add_node(node_type(work, *args, **kwargs), label="client")
    assert _edges(program) == {("client/0", "server/0")}


def test_a_node_without_handles_has_no_edge_and_each_callee_is_one_edge():
    program = lp.Program("p")
    server = _server(program)
    lonely = lp.PyNode(work, 1, "server/0")
    program.add_node(lonely, label="lonely")
    twice = lp.PyNode(work, server, [server], k=server)
    program.add_node(twice, label="twice")
    assert lonely.callees() == []
    assert twice.callees() == [program.groups["server"][0]]
    assert _edges(program) == {("twice/0", "server/0")}


def test_arguments_given_by_configure_after_add_node_are_edges_even_in_a_cycle():
    program = lp.Program("p")
    ping, pong = lp.CourierNode(Server), lp.CourierNode(Server)
    ping_handle = program.add_node(ping, label="ping")
    pong_handle = program.add_node(pong, label="pong")
    ping.configure(peer=pong_handle)
    pong.configure(pong_handle, ping_handle)  # itself too
    assert _edges(program) == {("ping/0", "pong/0"), ("pong/0", "pong/0"),
                               ("pong/0", "ping/0")}


def test_a_cacher_calls_its_source():
    program = lp.Program("p")
    cacher = program.add_node(lp.CacherNode(_server(program), 100, 1000), label="cacher")
    program.add_node(lp.PyNode(work, cacher), label="actor")
    assert _edges(program) == {("cacher/0", "server/0"), ("actor/0", "cacher/0")}


def test_every_sync_worker_calls_what_the_trainer_gets_and_callers_reach_the_chief():
    program = lp.Program("p")
    server = _server(program)
    trainer = program.add_node(lp.ReplicatedNode(work, server, num_workers=3), label="trainer")
    program.add_node(lp.PyNode(work, trainer), label="driver")
    assert _edges(program, collapse_at=None) == {
        ("trainer/0", "server/0"), ("trainer/1", "server/0"), ("trainer/2", "server/0"),
        ("driver/0", "trainer/0")}


def test_only_the_async_chief_builds_the_trainer_so_only_it_calls():
    program = lp.Program("p")
    program.add_node(lp.ReplicatedNode(work, _server(program), num_workers=2, num_ps=1,
                                       mode="async"), label="trainer")
    layout = _layout(program)
    assert layout["edges"] == {("trainer/0", "server/0")}
    labels = [layout["nodes"][f"trainer/{i}"]["label"] for i in range(4)]
    assert labels == ["trainer/0\\nwork (chief)", "trainer/1\\nwork (worker)",
                      "trainer/2\\nwork (worker)", "trainer/3\\nwork (ps)"]


def test_handles_of_colocated_nodes_are_edges_to_and_from_them():
    program = lp.Program("p")
    server = _server(program)
    colocation = lp.MultiThreadingColocation([])
    inner = colocation.add_node(lp.CourierNode(Server))
    colocation.add_node(lp.PyNode(work, inner, server))
    program.add_node(colocation, label="colo")
    program.add_node(lp.PyNode(work, inner), label="outside")
    assert _edges(program) == {("colo/0/1", "colo/0/0"), ("colo/0/1", "server/0"),
                               ("outside/0", "colo/0/0")}


def test_an_edge_to_a_colocation_ends_at_its_cluster():
    program = lp.Program("p")
    colocation = lp.MultiProcessingColocation([lp.PyNode(work), lp.PyNode(work)])
    program.add_node(lp.PyNode(work, program.add_node(colocation, label="colo")), label="user")
    assert '"user/0" -> "colo/0/0" [lhead="cluster_node:colo/0"];' in program.to_dot()
    assert _edges(program) == {("user/0", "colo/0/0")}


def test_a_handle_of_a_node_outside_the_program_draws_nothing():
    elsewhere = lp.Program("other")
    program = lp.Program("p")
    program.add_node(lp.PyNode(work, _server(elsewhere)), label="client")
    assert _edges(program) == set()


# --- shapes, clusters, nesting --------------------------------------------------------------


def test_each_node_type_has_its_own_shape_and_the_legend_shows_the_types_used():
    program = lp.Program("p")
    server = _server(program)
    program.add_node(lp.PyNode(work), label="py")
    program.add_node(lp.PyClassNode(Server), label="pyclass")
    program.add_node(lp.CacherNode(server, 100, 1000), label="cacher")
    program.add_node(lp.ReverbNode(list), label="replay")
    program.add_node(lp.ReplicatedNode(work), label="trainer")
    nodes = _layout(program)["nodes"]
    shapes = {name: nodes[name]["shape"] for name in
              ("server/0", "py/0", "pyclass/0", "cacher/0", "replay/0", "trainer/0")}
    assert shapes == {"server/0": "box", "py/0": "ellipse", "pyclass/0": "hexagon",
                      "cacher/0": "component", "replay/0": "cylinder", "trainer/0": "box3d"}
    assert nodes["server/0"]["style"] == "rounded,filled"
    assert len({(dot.SHAPES[k][0], dot.SHAPES[k][1]) for k in dot.SHAPES}) == len(dot.SHAPES)
    legend = {name: nodes[name]["shape"] for name in nodes if name.startswith("legend:")}
    assert legend == {"legend:CourierNode": "box", "legend:PyNode": "ellipse",
                      "legend:PyClassNode": "hexagon", "legend:CacherNode": "component",
                      "legend:ReverbNode": "cylinder", "legend:ReplicatedNode": "box3d"}
    assert "legend:CourierNode" not in _layout(program, legend=False)["nodes"]


class MyCourierNode(lp.CourierNode):
    pass


class MyNode(lp.Node):
    def create_handle(self):
        return None

    def run(self):
        return None

    def default_label(self):
        return "mine"


def test_a_users_node_type_is_drawn_as_the_launchpad_type_it_extends():
    program = lp.Program("p")
    program.add_node(MyCourierNode(Server), label="sub")
    program.add_node(MyNode(), label="own")
    nodes = _layout(program)["nodes"]
    assert (nodes["sub/0"]["shape"], nodes["sub/0"]["tooltip"]) == ("box", "CourierNode")
    assert (nodes["own/0"]["shape"], nodes["own/0"]["label"]) == ("octagon", "own/0\\nNode")


def test_groups_are_clusters_labelled_with_their_count_and_restart_policy():
    program = lp.Program("p")
    with program.group("actor", restart=lp.RestartPolicy(max_restarts=3)):
        for i in range(2):
            program.add_node(lp.PyNode(work, i))
    _server(program)
    clusters = _layout(program)["clusters"]
    assert clusters["cluster_group:actor"]["label"] == "actor (2 nodes)\\nrestarts ≤ 3"
    assert clusters["cluster_group:actor"]["nodes"] == {"actor/0", "actor/1"}
    assert clusters["cluster_group:server"]["label"] == "server (1 node)"
    assert clusters["cluster_group:server"]["nodes"] == {"server/0"}


def test_colocations_are_clusters_nested_in_their_group_holding_their_nodes():
    inner = lp.MultiThreadingColocation([lp.PyNode(work), lp.CourierNode(Server)])
    outer = lp.MultiProcessingColocation([lp.PyNode(work), inner])
    program = lp.Program("p")
    program.add_node(outer, label="colo")
    clusters = _layout(program)["clusters"]
    assert clusters["cluster_group:colo"]["clusters"] == {"cluster_node:colo/0"}
    assert clusters["cluster_node:colo/0"]["label"] == "colo/0: MultiProcessingColocation"
    assert clusters["cluster_node:colo/0"]["clusters"] == {"cluster_node:colo/0/1"}
    assert clusters["cluster_node:colo/0/1"]["label"] == "colo/0/1: MultiThreadingColocation"
    assert clusters["cluster_node:colo/0/1"]["nodes"] == {"colo/0/1/0", "colo/0/1/1"}
    assert clusters["cluster_node:colo/0"]["nodes"] == {"colo/0/0", "colo/0/1/0",
                                                         "colo/0/1/1"}


# --- collapsing ----------------------------------------------------------------------------


def _actors(program, count, callee, label="actor"):
    with program.group(label):
        return [program.add_node(lp.CourierNode(Server, callee)) for _ in range(count)]


def test_a_hundred_identical_actors_are_drawn_as_one_node_with_every_edge_kept():
    program = lp.Program("p")
    server = _server(program)
    actors = _actors(program, 100, server)
    program.add_node(lp.PyNode(work, actors), label="driver")
    layout = _layout(program)
    actor_nodes = {n for n in layout["nodes"] if n.startswith("actor/")}
    assert actor_nodes == {"actor/0"}
    assert layout["nodes"]["actor/0"]["label"] == "actor/0-99 ×100\\nServer"
    assert layout["clusters"]["cluster_group:actor"]["label"] == "actor (100 nodes)"
    assert layout["edges"] == {("actor/0", "server/0"), ("driver/0", "actor/0")}


def test_fewer_than_collapse_at_or_collapse_at_none_draws_each_node():
    program = lp.Program("p")
    _actors(program, 5, _server(program))
    assert {n for n in _layout(program, collapse_at=6)["nodes"] if n.startswith("actor/")} \
        == {f"actor/{i}" for i in range(5)}
    assert len(_layout(program, collapse_at=None)["edges"]) == 5
    with pytest.raises(ValueError, match="collapse_at"):
        program.to_dot(collapse_at=1)


def test_nodes_with_other_callers_or_callees_are_not_collapsed_with_the_rest():
    program = lp.Program("p")
    server, other = _server(program), _server(program, "other")
    actors = _actors(program, 5, server)
    program.add_node(lp.PyNode(work, actors[2]), label="watcher")  # calls actor 2 only
    _actors(program, 3, other, label="actor2")
    with program.group("actor2"):
        program.add_node(lp.CourierNode(Server, server))  # another callee
    layout = _layout(program)
    assert layout["nodes"]["actor/0"]["label"] == "actor/0-1,3-4 ×4\\nServer"
    assert layout["nodes"]["actor/2"]["label"] == "actor/2\\nServer"
    assert layout["nodes"]["actor2/0"]["label"] == "actor2/0-2 ×3\\nServer"
    assert layout["nodes"]["actor2/3"]["label"] == "actor2/3\\nServer"
    assert layout["edges"] == {("actor/0", "server/0"), ("actor/2", "server/0"),
                               ("watcher/0", "actor/2"), ("actor2/0", "other/0"),
                               ("actor2/3", "server/0")}


def test_nodes_of_another_type_or_running_something_else_are_not_collapsed():
    program = lp.Program("p")
    with program.group("mixed"):
        for _ in range(3):
            program.add_node(lp.PyNode(work))
        for _ in range(3):
            program.add_node(lp.PyClassNode(work))
        for _ in range(3):
            program.add_node(lp.PyNode(rest))
    labels = sorted(n["label"] for name, n in _layout(program)["nodes"].items()
                    if name.startswith("mixed/"))
    assert labels == ["mixed/0-2 ×3\\nwork", "mixed/3-5 ×3\\nwork", "mixed/6-8 ×3\\nrest"]


# --- escaping ------------------------------------------------------------------------------


@pytest.mark.parametrize("text, quoted", [
    ("plain", '"plain"'),
    ('say "hi"', '"say \\"hi\\""'),
    ("back\\slash\\", '"back\\\\slash\\\\"'),
    ("two\nlines\r\nthree", '"two\\nlines\\nthree"'),
    ("{braces} [brackets]; -> <b>&amp; &", '"{braces} [brackets]; -> <b>&amp;amp; &amp;"'),
])
def test_quote_escapes_quotes_backslashes_and_line_breaks(text, quoted):
    assert dot.quote(text) == quoted


# --- rendering -----------------------------------------------------------------------------


WEIRD = 'we"ird {label} <b>&amp; & \\n ×'


def _weird_program():
    program = lp.Program("p")
    server = _server(program)
    program.add_node(lp.PyNode(work, server), label=WEIRD)
    with program.group("actor"):
        for _ in range(4):
            program.add_node(lp.PyNode(work, server))
    return program


def test_an_svg_is_drawn_by_dot_with_every_node_edge_and_label_as_written(tmp_path):
    path = lp.render_program(_weird_program(), tmp_path / "graph.svg")
    assert path == tmp_path / "graph.svg"
    root = ElementTree.parse(path).getroot()
    titles = collections.defaultdict(set)  # "node", "edge", "cluster" -> their titles
    for g in root.iter(SVG + "g"):
        if g.find(SVG + "title") is not None:
            titles[g.get("class")].add(g.find(SVG + "title").text)
    assert {"server/0", "actor/0", "legend:PyNode", "legend:CourierNode"} <= titles["node"]
    assert {"actor/0->server/0"} <= titles["edge"]
    assert {"cluster_group:actor", "cluster_group:server"} <= titles["cluster"]
    texts = {t.text for t in root.iter(SVG + "text")}
    assert {f"{WEIRD}/0", f"{WEIRD} (1 node)", "actor/0-3 ×4", "program p"} <= texts


def test_png_and_dot_files_are_written_by_their_suffix(tmp_path):
    program = _weird_program()
    assert lp.render_program(program, tmp_path / "g.PNG").read_bytes()[:8] \
        == b"\x89PNG\r\n\x1a\n"
    assert (lp.render_program(program, str(tmp_path / "g.dot")).read_text()
            == program.to_dot())


def test_a_bad_suffix_is_refused_naming_the_formats(tmp_path):
    with pytest.raises(ValueError, match=r"graph\.jpg.*\.svg, \.png, \.pdf, \.dot, \.gv"):
        lp.render_program(_weird_program(), tmp_path / "graph.jpg")
    with pytest.raises(ValueError, match="suffix"):
        lp.render_program(_weird_program(), tmp_path / "graph")
    assert not list(tmp_path.iterdir())
    with pytest.raises(TypeError, match="lp.Program"):
        lp.render_program("program", tmp_path / "graph.svg")


def _draw_in_subprocess(tmp_path, prelude: str, env: dict | None = None):
    code = (f"{prelude}\nimport launchpad as lp\np = lp.Program('p')\n"
            "p.add_node(lp.PyNode(print), label='x')\n"
            f"lp.render_program(p, {str(tmp_path / 'g.svg')!r})\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env={**os.environ, **(env or {})})


def test_without_dot_on_the_path_the_error_says_to_install_graphviz(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    done = _draw_in_subprocess(tmp_path, "", {"PATH": str(empty)})
    assert done.returncode != 0
    assert "RuntimeError: Drawing a program needs Graphviz's `dot` program" in done.stderr
    assert "apt-get install graphviz" in done.stderr
    assert not (tmp_path / "g.svg").exists()


def test_without_the_graphviz_package_the_error_names_the_extra(tmp_path):
    done = _draw_in_subprocess(tmp_path, "import sys; sys.modules['graphviz'] = None")
    assert done.returncode != 0
    assert ("ImportError: Drawing a program needs the graphviz package: pip install "
            "'launchpad-next[graph]'") in done.stderr
