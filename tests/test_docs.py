"""The documentation: README.md and the pages of docs/, built as a site by MkDocs.

The site builds strictly (any warning fails it, as under `make docs`) without importing
launchpad or TensorFlow; every relative link and `#anchor` of README.md and docs/ resolves (the
pages' links stay inside docs/, the only folder the site has); every command their shell code
blocks show is one this project has - a Makefile target, a `launchpad` subcommand and its
options (read from the CLI's own parser), a module of benchmarks/ or examples/ and the flags
it defines, an `--lp_*` flag, an extra of pyproject.toml, a pytest path or marker - and the
reference written by hand (lp.launch's arguments, the flags) names exactly what the code has.
So what a reader copies works, and the docs cannot drift from the code unnoticed.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import pathlib
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator

import pytest
from absl import flags as absl_flags

import launchpad as lp
from launchpad import cli
from launchpad import flags as lp_flags
from launchpad.launch import launchers

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.MULTILINE)
# A line that mkdocs fills with a file, or a marked section of one (pymdownx.snippets).
_SNIPPET = re.compile(r'^--8<-- "([^":]+)(?::([\w-]+))?"$', re.MULTILINE)
# A name of the API reference (`::: launchpad.Program`): mkdocstrings makes it an anchor.
_REFERENCE = re.compile(r"^::: (\S+)$", re.MULTILINE)

# mkdocs.yml's own builder, run in a fresh interpreter that then says what it imported.
_BUILD = """
import logging
import sys
from mkdocs.commands.build import build
from mkdocs.config import load_config
logging.basicConfig(format="%(levelname)s %(message)s")
try:
    build(load_config(config_file="mkdocs.yml", site_dir=sys.argv[1], strict=True))
except SystemExit as e:  # mkdocs' Abort, silent otherwise: "Aborted with 1 warnings ..."
    sys.exit(str(e))
imported = sorted({m.split(".")[0] for m in sys.modules} & {"launchpad", "tensorflow"})
sys.exit(f"the build imported {imported}" if imported else 0)
"""


def _page_id(page: pathlib.Path) -> str:
    """The page's path in the repository: the test ids, and the failures' messages."""
    return str(page.relative_to(ROOT))


def test_the_site_builds_strictly_without_importing_launchpad(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install '.[docs]'")
    site = tmp_path / "site"
    result = subprocess.run([sys.executable, "-c", _BUILD, str(site)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-4000:]
    assert (site / "reference" / "launch.html").is_file()
    broken = [f"{page.relative_to(site)} -> {target}" for page, target in _links_of(site)
              if not _opens_from_disk(page, target)]
    assert not broken, "links that do not open a file from disk:\n" + "\n".join(broken)


_HTML_LINK = re.compile(r'(?:href|src)="([^"]*)"')


def _links_of(site: pathlib.Path) -> Iterator[tuple[pathlib.Path, str]]:
    """Every link of every page of the built site to another place of the site (but those of
    404.html, a web server's page, absolute by design: a browser on files never shows it)."""
    for page in site.rglob("*.html"):
        if page == site / "404.html":
            continue
        for target in _HTML_LINK.findall(page.read_text()):
            if not re.match(r"^(#|[a-z][a-z0-9+.-]*:|//)", target):  # (a scheme: elsewhere)
                yield page, target


def _opens_from_disk(page: pathlib.Path, target: str) -> bool:
    """Whether following `target` from `page`, as a browser does from a file: URL, opens a
    file (a folder shows a listing, not the page)."""
    path = target.split("#")[0].split("?")[0]
    return not path or (page.parent / path).resolve().is_file()


def _expanded(page: pathlib.Path) -> str:
    """The page as the site shows it: its snippet lines replaced by what they include."""
    def include(match: re.Match) -> str:
        text = (ROOT / match[1]).read_text()
        if match[2]:
            text = re.search(rf"\[start:{match[2]}\][^\n]*\n(.*?)\n[^\n]*\[end:{match[2]}\]",
                             text, re.DOTALL)[1]
        return text
    return _SNIPPET.sub(include, page.read_text())


def _prose(text: str) -> str:
    """The text without its code: fenced blocks and inline code spans."""
    return re.sub(r"`[^`\n]*`", "", _FENCE.sub("", text))


def _slug(heading: str) -> str:
    """A heading's anchor, as GitHub and MkDocs both make it for the headings written here."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    return re.sub(r"[^\w\- ]", "", text.lower()).strip().replace(" ", "-")


@functools.cache
def _anchors(page: pathlib.Path) -> frozenset[str]:
    """The `#anchors` a link into the page may name: its headings' and its reference's."""
    text = _expanded(page)
    return frozenset([_slug(h) for h in _HEADING.findall(_FENCE.sub("", text))]
                     + _REFERENCE.findall(text))


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_link_and_anchor_resolves(page):
    broken = []
    for link in _LINK.findall(_prose(_expanded(page))):
        if re.match(r"[a-z]+:", link):
            continue  # a web address
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link}: no such file")
        elif page.is_relative_to(DOCS) and not target.is_relative_to(DOCS):
            broken.append(f"{link}: outside docs/, so not in the site")
        elif anchor and anchor not in _anchors(target):
            broken.append(f"{link}: no heading #{anchor} in {_page_id(target)}")
    assert not broken, f"{_page_id(page)}: " + "; ".join(broken)


def _commands(text: str) -> Iterator[str]:
    """The shell commands of a page's fenced blocks: every line of a sh, bash or shell block
    (continued lines joined), and the `$ ` lines of a console or unlabelled block, where the
    other lines are output; an unlabelled block's lines that start with `make ` too."""
    for language, body in _FENCE.findall(text):
        for line in body.replace("\\\n", " ").splitlines():
            if line.startswith("$ "):
                yield line[2:]
            elif language in ("sh", "bash", "shell") or (not language and
                                                         line.startswith("make ")):
                yield line


def _unbracketed(word: str) -> str:
    """A word of a usage line without its brackets: `[--timeout` and `SECS]` of
    `[--timeout SECS]`; `launchpad-next[ray]` stays as it is."""
    word = word.removeprefix("[")
    return word if "[" in word else word.removesuffix("]")


@functools.cache
def _make_targets() -> frozenset[str]:
    """The Makefile's rules (not its .PHONY list, which may name a target with no rule)."""
    makefile = (ROOT / "Makefile").read_text()
    return frozenset(re.findall(r"^([\w-]+) *:(?!=)", makefile, re.MULTILINE))


@functools.cache
def _extras() -> frozenset[str]:
    """The extras of pyproject.toml (read as text: tomllib is not in Python 3.10)."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    section = pyproject.split("[project.optional-dependencies]")[1].split("\n[")[0]
    return frozenset(re.findall(r"^([\w-]+) = ", section, re.MULTILINE))


@functools.cache
def _launch_flags() -> absl_flags.FlagValues:
    """launchpad's flags, defined apart from the process's own, to parse examples with."""
    values = absl_flags.FlagValues()
    lp_flags.define(values)
    return values


def _flag_problems(word: str) -> list[str]:
    """An `--lp_*` flag must be one launchpad defines, with a value it takes (unless the value
    is a placeholder: `PORT`, `...`)."""
    name, _, value = word.removeprefix("--").partition("=")
    if name not in _launch_flags() and name.removeprefix("no") not in _launch_flags():
        return [f"{word}: launchpad defines no such flag"]
    if value and not re.fullmatch(r"[A-Z_]+|\.\.\.", value):
        try:
            _launch_flags()(["launch.py", word], known_only=True)
        except absl_flags.Error as e:
            return [f"{word}: {e}"]
    return []


def _module_file(module: str) -> pathlib.Path | None:
    """The file `python -m MODULE` runs, when the module is this repository's."""
    path = ROOT.joinpath(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__main__.py"):
        if candidate.is_file():
            return candidate
    return None


def _function_problems(target: str) -> list[str]:
    """`MODULE:FUNCTION` (launchpad graph, launchpad kubernetes-manifests) must name a
    function of a module of this project."""
    module, function = target.split(":")
    file = _module_file(module)
    if file is None or not re.search(rf"^def {function}\(", file.read_text(), re.MULTILINE):
        return [f"{target}: no function {function} in a module {module}"]
    return []


def _cli_problems(words: list[str]) -> list[str]:
    """`launchpad ...`: the subcommand and its options, against the parser the CLI builds."""
    parser = cli._parser()
    subcommands = next(a for a in parser._actions
                       if isinstance(a, argparse._SubParsersAction)).choices
    current, rest, problems = parser, list(words), []
    while rest:
        word = rest.pop(0)
        if word.startswith("-"):
            action = current._option_string_actions.get(word.split("=")[0])
            if action is None:
                problems.append(f"{current.prog} has no option {word}")
            elif action.nargs != 0 and "=" not in word and rest:
                rest.pop(0)  # the option's value
        elif current is parser:
            if word not in subcommands:
                return [f"launchpad has no subcommand {word!r}"]
            current = subcommands[word]
        elif any(a.nargs == argparse.REMAINDER for a in current._actions):
            break  # a launch script: what follows is its command line
        elif re.fullmatch(r"[\w.]+:\w+", word):
            problems += _function_problems(word)
    return problems


def _module_problems(module: str, options: list[str]) -> list[str]:
    """`python -m benchmarks.X` / `examples.X...`: the module, and each option it is given
    named in its sources (or, for an example, in its package's)."""
    file = _module_file(module)
    if file is None:
        return [f"no module {module} in this project"]
    sources = [file] if module.count(".") == 1 else sorted(file.parent.glob("*.py"))
    text = "\n".join(path.read_text() for path in sources)
    names = [option.lstrip("-").split("=")[0] for option in options
             if option.startswith("-") and not option.startswith("--lp_")]
    return [f"{module} defines no --{name}" for name in names
            if not re.search(rf"\b{name.replace('-', '_')}\b", text)]


def _pytest_problems(arguments: list[str], markers: set[str]) -> list[str]:
    """`python -m pytest ...`: its paths exist, its `-m` expression names declared markers."""
    problems, rest = [], list(arguments)
    while rest:
        word = rest.pop(0)
        if word == "-m":
            names = set(re.findall(r"\w+", rest.pop(0))) - {"and", "or", "not"}
            problems += [f"no pytest marker {name!r}" for name in sorted(names - markers)]
        elif not word.startswith("-") and not (ROOT / word.split("::")[0]).exists():
            problems.append(f"no test path {word}")
    return problems


def _command_problems(command: str, markers: set[str]) -> list[str]:
    """What in one command is not this project's; commands of other tools pass as they are."""
    words = [_unbracketed(w) for w in shlex.split(command, comments=True)]
    if not words:
        return []
    problems = [p for w in words if w.startswith(("--lp_", "--nolp_")) for p in _flag_problems(w)]
    program, arguments = pathlib.PurePath(words[0]).name, words[1:]
    if program == "make":
        problems += [f"the Makefile has no target {target!r}" for target in arguments
                     if target not in _make_targets()]
    elif program == "launchpad":
        problems += _cli_problems(arguments)
    elif program == "pip" and arguments[:1] == ["install"]:
        for spec in arguments[1:]:
            project, _, extras = spec.partition("[")
            if project in ("launchpad-next", "."):
                problems += [f"pyproject.toml has no extra {extra!r}"
                             for extra in extras.rstrip("]").split(",")
                             if extra and extra not in _extras()]
    elif program.startswith("python") and arguments[:1] == ["-m"]:
        module, options = arguments[1], arguments[2:]
        if module == "pytest":
            problems += _pytest_problems(options, markers)
        elif module.split(".")[0] in ("benchmarks", "examples", "launchpad"):
            problems += _module_problems(module, options)
    return problems


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_command_shown_is_one_the_project_has(page, pytestconfig):
    markers = {line.split(":")[0] for line in pytestconfig.getini("markers")}
    problems = [f"`{command}`: {problem}" for command in _commands(page.read_text())
                for problem in _command_problems(command, markers)]
    assert not problems, f"{_page_id(page)}:\n" + "\n".join(problems)


def _rows(page: pathlib.Path, heading: str) -> dict[str, str]:
    """The table under `## heading`: each row's code name and its default, as written."""
    section = page.read_text().split(f"\n## {heading}\n")[1].split("\n## ")[0]
    return dict(re.findall(r"^\| `([^`]+)` \| *`?([^`|]*?)`? *\|", section, re.MULTILINE))


def _flag_default(flag: absl_flags.Flag) -> str:
    """A flag's default as the reference writes it: none, `true`, `10`, `local_mt`."""
    if flag.default is None:
        return ""
    return str(flag.default).lower() if isinstance(flag.default, bool) else str(flag.default)


def test_the_hand_written_reference_names_what_the_code_has():
    """lp.launch's arguments and the flags are written by hand in the reference (static
    analysis cannot tell the function lp.launch from the package launchpad.launch); their
    names, order and defaults must stay what the code has."""
    page = DOCS / "reference" / "launch.md"
    parameters = inspect.signature(lp.launch).parameters.values()
    engines = [(keyword, "None") for keyword in launchers.settings()]  # (**engine_settings)
    assert list(_rows(page, "launch").items()) == [
        (p.name, "" if p.default is p.empty else repr(p.default)) for p in parameters
        if p.kind is not p.VAR_KEYWORD] + engines
    flags = _launch_flags()
    assert _rows(page, "Flags") == {f"--{name}": _flag_default(flags[name]) for name in flags}


def test_the_readme_program_prints_what_the_readme_says(tmp_path):
    """README's program, run as its console block shows (each launch type from the flag),
    prints exactly the lines shown there."""
    section = (ROOT / "README.md").read_text().split("[start:program]")[1]
    blocks = dict((language, body) for language, body in _FENCE.findall(section)[:2])
    script = tmp_path / "consumer_producers.py"
    script.write_text(blocks["python"])
    runs = re.findall(r"^\$ (python consumer_producers\.py.*)\n((?:[^$].*\n)*)",
                      blocks["console"], re.MULTILINE)
    assert len(runs) == 2, blocks["console"]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "TMPDIR": str(tmp_path)}
    for command, shown in runs:
        done = subprocess.run([sys.executable, *shlex.split(command)[1:]], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=120)
        assert (done.returncode, done.stdout, done.stderr) == (0, shown, ""), command
