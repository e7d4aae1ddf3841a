"""Checks the Markdown of a checkout (README.md and docs/*.md) against its files.

- Every relative link, [text](path) or ![alt](path), names a file or folder that exists,
  relative to the page; a #anchor (alone or after a .md path) names a heading of that page,
  spelt as GitHub spells heading anchors.
- Every command in the shell code blocks of README.md and docs/getting-started.md that names a
  repository path (scripts/, configs/, data/, docs/, tests/, src/, apps/, .ci/) names one that
  exists. A build/NAME path is a built artefact, absent from a clean clone: NAME must be a
  target some CMakeLists.txt builds (add_executable) instead. runs/... paths are what the
  commands write, and are not checked.

Links to other sites (http:, https:, mailto:) are not fetched. A failure lists one line per
problem, each naming file:line. The second test runs the checker on a checkout broken on
purpose (doc-links-broken/), where it must name each problem.

  pytest tests/scripts/test_doc_links.py
"""
import pathlib
import re
import shlex

from nmt_tools.paths import ROOT

REPO_DIRS = ("scripts/", "configs/", "data/", "docs/", "tests/", "src/", "apps/", ".ci/")
COMMAND_PAGES = ("README.md", "docs/getting-started.md")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)(.*)$")


def pages(root):
    found = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    return [p for p in found if p.is_file()]


def prose_lines(text):
    """(line number, line) outside fenced code blocks, with inline code spans blanked."""
    in_fence = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            yield number, re.sub(r"`[^`]*`", "``", line)


def code_blocks(text):
    """(first line number, language, lines) of each fenced block."""
    block, language, start = None, "", 0
    for number, line in enumerate(text.splitlines(), 1):
        fence = FENCE.match(line)
        if fence and block is None:
            block, language, start = [], fence.group(2).strip(), number + 1
        elif fence:
            yield start, language, block
            block = None
        elif block is not None:
            block.append(line)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def heading_anchors(path):
    """Anchors of the page's headings, code spans included (read without blanking)."""
    seen, result = {}, set()
    in_fence = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        heading = None if in_fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            base = slug(heading.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            result.add(base if count == 0 else f"{base}-{count}")
    return result


def check_links(root, page, problems):
    checked = 0
    for number, line in prose_lines(page.read_text(encoding="utf-8")):
        for match in LINK.finditer(line):
            target = match.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            checked += 1
            where = f"{page.relative_to(root)}:{number}"
            path_part, _, anchor = target.partition("#")
            linked = (page.parent / path_part).resolve() if path_part else page
            if path_part and not linked.exists():
                problems.append(f"{where}: link to {target}: {path_part} does not exist")
                continue
            if anchor and linked.suffix == ".md" and anchor not in heading_anchors(linked):
                problems.append(f"{where}: link to {target}: no heading with anchor #{anchor} "
                                f"in {linked.relative_to(root)}")
    return checked


def cmake_targets(root):
    targets = set()
    for lists in root.rglob("CMakeLists.txt"):
        if "build" in lists.relative_to(root).parts[:1]:
            continue
        targets.update(re.findall(r"add_executable\(\s*([\w.+-]+)", lists.read_text(encoding="utf-8")))
    return targets


def command_words(lines):
    """The words of each command, with continuation lines joined and comments dropped."""
    command, start = "", 0
    for offset, line in enumerate(lines):
        if not command:
            start = offset
        command += line.rstrip("\\").rstrip() + " " if line.rstrip().endswith("\\") else line
        if line.rstrip().endswith("\\"):
            continue
        text = command.strip()
        command = ""
        if not text or text.startswith("#"):
            continue
        try:
            words = shlex.split(text, comments=True)
        except ValueError:
            words = text.split(" #")[0].split()
        yield start, words


def check_commands(root, page, targets, problems):
    checked = 0
    for start, language, lines in code_blocks(page.read_text(encoding="utf-8")):
        if language not in ("sh", "bash", "shell", "console"):
            continue
        for offset, words in command_words(lines):
            where = f"{page.relative_to(root)}:{start + offset}"
            for word in words:
                value = word.split("=", 1)[1] if re.match(r"^[-\w.]+=", word) else word
                if value.startswith("build/") and value != "build/":
                    checked += 1
                    name = value[len("build/"):].split("/")[-1]
                    if name not in targets:
                        problems.append(f"{where}: {value}: no CMake target builds {name}")
                elif value.startswith(REPO_DIRS):
                    checked += 1
                    if not (root / value).exists():
                        problems.append(f"{where}: {value} does not exist")
    return checked


def problems_of(root: pathlib.Path) -> tuple[list[str], int, int]:
    """(problems, relative links checked, command paths checked) of the checkout at `root`."""
    root = root.resolve()
    problems = []
    links = sum(check_links(root, page, problems) for page in pages(root))
    targets = cmake_targets(root)
    paths = sum(check_commands(root, root / name, targets, problems)
                for name in COMMAND_PAGES if (root / name).is_file())
    return problems, links, paths


def test_every_link_and_command_resolves() -> None:
    problems, links, paths = problems_of(ROOT)
    assert not problems, f"doc links: {len(problems)} problem(s):\n" + "\n".join(problems)
    print(f"doc links: {links} relative links and {paths} command paths resolve "
          f"({len(pages(ROOT))} pages)")


# What the broken checkout must show, in this order (each file:line where it has one).
BROKEN = ["README.md:6: link to docs/nope.md", "README.md:7: ", "#no-such-heading",
          "README.md:8: ", "#nowhere", "scripts/missing.sh does not exist",
          "configs/missing.yaml does not exist", "no CMake target builds nmt-nothing"]


def test_a_broken_link_fails() -> None:
    problems, _, _ = problems_of(pathlib.Path(__file__).resolve().parent / "doc-links-broken")
    text = "\n".join(problems)
    print(text)
    assert len(problems) == 6, f"expected 6 problems, found {len(problems)}"
    position = 0
    for wanted in BROKEN:
        found = text.find(wanted, position)
        assert found >= 0, f"{wanted!r} missing (in order) from:\n{text}"
        position = found + len(wanted)
