#!/usr/bin/env python3
"""Enforces the layer order of ARCHITECTURE.md: no module includes a higher one.

Every file under src/<m>/ and include/sluice/<m>/ belongs to module m; headers
directly in include/sluice/ (the user-facing API) belong to api. For each
#include in those files the included module is found from the path:

  <sluice/x/...>     module x (public header)
  <sluice/foo.h>     api
  "..."              resolved relative to the including file, then src/, then
                     include/; a file under src/<x>/ is module x (private)

and the include fails when the included module's layer is above the including
module's. Modules on the same layer may include each other. Headers under
include/ must not include private headers from src/ (only include/ is
installed for users).

Usage: tools/check_layers.py [--root DIR] [--self-test]
Exit status: 0 clean, 1 violations found, 2 usage error.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

# Lowest first. Keep in sync with the "Layers" section of ARCHITECTURE.md.
LAYERS = {
    "core": 0,
    "graph": 1,
    "state": 2,
    "window": 2,
    # Checkpointing sits below the runtime: tasks use the barrier aligner and
    # the subtask checkpointer, the scheduler uses the coordinator, and the
    # coordinator reaches tasks only through an interface of its own.
    "checkpoint": 3,
    "runtime": 4,
    # The REST endpoint, web UI and metric reporters serve both the JobManager
    # and embedded jobs.
    "rest": 5,
    "cluster": 5,
    # The public API (include/sluice/*.h and src/api) sits above the engine;
    # connectors and SQL are built on it, like user code.
    "api": 6,
    "connectors": 7,
    "sql": 7,
}

# include/sluice/internal/ is no module of its own: it holds the engine
# templates the public API instantiates in a user's job, each of which sits at
# the layer of what it includes. An include of an internal header therefore
# counts as an include of the highest module that header reaches
# (transitively), and the internal headers themselves are checked only for
# private includes.
INTERNAL = "internal"

SOURCE_SUFFIXES = {".h", ".hh", ".hpp", ".hxx", ".inl", ".ipp", ".tcc", ".cc", ".cpp", ".cxx"}

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
BLOCK_COMMENT_RE = re.compile(r"/\*.*?\*/", re.DOTALL)

SELF = "tools/check_layers.py"


def strip_block_comments(text: str) -> str:
    """Removes /* ... */ comments, keeping line numbers."""
    return BLOCK_COMMENT_RE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


class Checker:
    def __init__(self, root: Path):
        self.root = root.resolve()
        self.src = self.root / "src"
        self.include = self.root / "include"
        self.errors: list[str] = []
        self.unknown: dict[str, str] = {}  # module name -> where it was seen
        self.files_checked = 0
        self.internal_cache: dict[str, str | None] = {}

    def rel(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return path.as_posix()

    def unknown_module(self, name: str, where: str) -> None:
        self.unknown.setdefault(name, where)

    # ---- which module a file in the tree belongs to -------------------------

    def module_of(self, path: Path) -> tuple[str | None, bool]:
        """Returns (module, is_private) for a file under src/ or include/sluice/.

        module is None when the file is outside both trees, or directly in
        src/ (which belongs to no module).
        """
        path = Path(os.path.normpath(path))
        try:
            parts = path.relative_to(self.src).parts
            if len(parts) < 2:
                return None, True
            return parts[0], True
        except ValueError:
            pass
        try:
            parts = path.relative_to(self.include / "sluice").parts
            if len(parts) == 1:
                return "api", False
            return parts[0], False
        except ValueError:
            pass
        return None, False

    # ---- what an include refers to ------------------------------------------

    def resolve(self, including: Path, bracket: str, target: str) -> tuple[str | None, bool, str]:
        """Returns (module, is_private, shown_path) for one #include.

        module is None for includes outside Sluice (std, fmt, gtest, ...).
        """
        if target.startswith("sluice/"):
            parts = target.split("/")
            if len(parts) == 2:
                return "api", False, target
            if parts[1] == INTERNAL:
                return self.internal_module(self.include / target), False, target
            return parts[1], False, target

        candidates = []
        if bracket == '"':
            candidates.append(including.parent / target)
        candidates.append(self.src / target)
        if bracket == '"':
            candidates.append(self.include / target)
        for cand in candidates:
            if cand.is_file():
                module, private = self.module_of(cand.resolve())
                if module is not None:
                    return module, private, target
                if private:  # a file directly in src/
                    return None, True, target
                return None, False, target

        # Not found on disk (not written yet, or generated): a quoted include
        # whose first folder is a module name still names that module in src/.
        if bracket == '"':
            first = target.split("/")[0]
            if "/" in target and first in LAYERS:
                return first, True, target
            module, private = self.module_of(including.parent / target)
            if module is not None:
                return module, private, target
        return None, False, target

    def internal_module(self, path: Path) -> str | None:
        """The highest module an internal header reaches through its includes."""
        path = Path(os.path.normpath(path))
        key = path.as_posix()
        if key in self.internal_cache:
            return self.internal_cache[key]
        self.internal_cache[key] = None  # while it is being resolved (include cycles)
        if not path.is_file():
            return None
        best = None
        text = strip_block_comments(path.read_text(encoding="utf-8", errors="replace"))
        for line in text.splitlines():
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            dep, _, _ = self.resolve(path, m.group(1), m.group(2).strip())
            if dep is None or dep not in LAYERS:
                continue
            if best is None or LAYERS[dep] > LAYERS[best]:
                best = dep
        self.internal_cache[key] = best
        return best

    # ---- the check ----------------------------------------------------------

    def iter_files(self):
        for top in (self.src, self.include / "sluice"):
            if not top.is_dir():
                continue
            for dirpath, dirnames, filenames in os.walk(top):
                dirnames.sort()
                for name in sorted(filenames):
                    p = Path(dirpath) / name
                    if p.suffix in SOURCE_SUFFIXES:
                        yield p

    def check_file(self, path: Path) -> None:
        module, _ = self.module_of(path)
        rel = self.rel(path)
        in_include = rel.startswith("include/")
        if module is None:
            self.errors.append(
                f"{rel}: source file directly in src/ belongs to no module; "
                f"move it into src/<module>/")
            return
        if module not in LAYERS and module != INTERNAL:
            folder = "src" if not in_include else "include/sluice"
            self.unknown_module(module, f"{folder}/{module}/")
            return
        self.files_checked += 1
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            self.errors.append(f"{rel}: cannot read: {e}")
            return
        for lineno, line in enumerate(strip_block_comments(text).splitlines(), start=1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            bracket, target = m.group(1), m.group(2).strip()
            dep, dep_private, shown = self.resolve(path, bracket, target)
            if in_include and dep_private:
                self.errors.append(
                    f"{rel}:{lineno} includes {shown}: public headers under include/ may not "
                    f"include private headers from src/ (only include/ is installed)")
                continue
            if dep is None:
                continue
            if dep not in LAYERS:
                self.unknown_module(dep, f"{rel}:{lineno} (#include {bracket}{target})")
                continue
            if module != INTERNAL and LAYERS[dep] > LAYERS[module]:
                self.errors.append(
                    f"{rel}:{lineno} includes {shown}: {module} (layer {LAYERS[module]}) "
                    f"may not include {dep} (layer {LAYERS[dep]})")

    def run(self) -> list[str]:
        for path in self.iter_files():
            self.check_file(path)
        for name, where in sorted(self.unknown.items()):
            self.errors.append(
                f"unknown module '{name}' (seen at {where}): add it with its layer to LAYERS "
                f"in {SELF} and to the Layers section of ARCHITECTURE.md")
        return self.errors


def check(root: Path) -> tuple[list[str], int]:
    c = Checker(root)
    errors = c.run()
    return errors, c.files_checked


# ---- self-test --------------------------------------------------------------

def self_test() -> int:
    """Builds small trees with known violations and checks each is reported."""
    failures: list[str] = []

    def expect(name: str, files: dict[str, str], want: list[str]) -> None:
        with tempfile.TemporaryDirectory(prefix="check_layers_") as tmp:
            root = Path(tmp)
            for rel, content in files.items():
                p = root / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(content)
            got, _ = check(root)
        missing = [w for w in want if not any(w in g for g in got)]
        extra = [g for g in got if not any(w in g for w in want)]
        if missing or extra or len(got) != len(want):
            failures.append(f"{name}:\n  want: {want}\n  got:  {got}")

    # A tree that follows every rule.
    clean = {
        "src/core/config.h": "#pragma once\n#include <string>\n#include <sluice/core/status.h>\n",
        "src/core/config.cc": '#include "config.h"\n#include "core/config.h"\n',
        "src/graph/job_graph.cc": '#include "core/config.h"\n#include <sluice/core/status.h>\n',
        "src/state/backend.h": '#pragma once\n#include "graph/job_graph.h"\n',
        "src/window/op.cc": '#include "state/backend.h"\n',  # same layer: allowed
        "src/runtime/task.h": "#pragma once\n",
        "src/runtime/task.cc": '#include "task.h"\n#include "../graph/job_graph.h"\n',
        "src/runtime/net/channel.cc": '#include "../task.h"\n#include "runtime/task.h"\n',
        "src/api/env.cc": '#include <sluice/sluice.h>\n#include "runtime/task.h"\n',
        "include/sluice/core/status.h": "#pragma once\n#include <string>\n",
        "include/sluice/sluice.h": "#pragma once\n#include <sluice/core/status.h>\n",
        # Commented-out includes do not count.
        "src/core/commented.cc": '// #include "runtime/task.h"\n/*\n#include "api/x.h"\n*/\n',
    }
    expect("clean tree", clean, [])

    expect("graph includes runtime (quoted, via src/)", {
        **clean,
        "src/graph/foo.cc": '#include <vector>\n\n#include "runtime/task.h"\n',
    }, ["src/graph/foo.cc:3 includes runtime/task.h: graph (layer 1) may not include runtime "
        "(layer 4)"])

    expect("core includes the public API", {
        **clean,
        "include/sluice/core/bad.h": "#pragma once\n#include <sluice/sluice.h>\n",
    }, ["include/sluice/core/bad.h:2 includes sluice/sluice.h: core (layer 0) may not include "
        "api (layer 6)"])

    expect("an internal header counts as the highest module it reaches", {
        **clean,
        "include/sluice/internal/typed_state.h": '#pragma once\n#include <sluice/state/x.h>\n',
        "include/sluice/internal/typed_op.h":
            '#pragma once\n#include <sluice/internal/typed_state.h>\n#include <sluice/api.h>\n',
        "src/window/uses_state.cc": '#include <sluice/internal/typed_state.h>\n',
        "src/state/uses_op.cc": '#include <sluice/internal/typed_op.h>\n',
    }, ["src/state/uses_op.cc:1 includes sluice/internal/typed_op.h: state (layer 2) may not "
        "include api (layer 6)"])

    expect("state includes runtime by relative path", {
        **clean,
        "src/state/rel.cc": '#include "../runtime/task.h"\n',
    }, ["src/state/rel.cc:1 includes ../runtime/task.h: state (layer 2) may not include "
        "runtime (layer 4)"])

    expect("include of a file not written yet", {
        **clean,
        "src/state/later.cc": '#include "../cluster/rpc.h"\n#include "checkpoint/coordinator.h"\n',
    }, ["src/state/later.cc:1 includes ../cluster/rpc.h: state (layer 2) may not include cluster",
        "src/state/later.cc:2 includes checkpoint/coordinator.h: state (layer 2) may not include "
        "checkpoint (layer 3)"])

    expect("public header includes a private one", {
        **clean,
        "include/sluice/stream.h": '#pragma once\n#include "runtime/task.h"\n',
    }, ["include/sluice/stream.h:2 includes runtime/task.h: public headers under include/ may "
        "not include private headers"])

    expect("unknown module folder", {
        **clean,
        "src/metrics/gauge.cc": "#include <string>\n",
    }, ["unknown module 'metrics' (seen at src/metrics/)"])

    expect("include of an unknown public module", {
        **clean,
        "src/runtime/uses.cc": "#include <sluice/mystery/x.h>\n",
    }, ["unknown module 'mystery'"])

    if failures:
        print("check_layers self-test FAILED:")
        for f in failures:
            print(f)
        return 1
    print("check_layers self-test: OK")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="repository root (default: the one holding this script)")
    parser.add_argument("--self-test", action="store_true",
                        help="check that known violations in a temporary tree are caught")
    args = parser.parse_args(argv)
    if args.self_test:
        return self_test()
    if not (args.root / "src").is_dir() and not (args.root / "include").is_dir():
        print(f"check_layers: {args.root} has neither src/ nor include/", file=sys.stderr)
        return 2
    errors, n = check(args.root)
    for e in errors:
        print(e)
    if errors:
        order = " < ".join(
            " = ".join(f"{m}({layer})" for m, l in LAYERS.items() if l == layer)
            for layer in sorted(set(LAYERS.values())))
        print(f"check_layers: {len(errors)} problem(s); layer order (lowest first): {order}")
        return 1
    print(f"check_layers: OK ({n} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
