"""The package itself: importable on Python 3.9 (syntax), documented, and
its version stated once."""

from __future__ import annotations

import ast
import inspect
import os
import re
import sys
import unittest

import harness
import permitd

PKG = os.path.join(harness.SRC, "permitd")
ROOT = os.path.dirname(harness.SRC)


class PackageTest(unittest.TestCase):
    def test_sources_parse_as_python_3_9(self) -> None:
        files = [os.path.join(PKG, f) for f in sorted(os.listdir(PKG)) if f.endswith(".py")]
        files.append(os.path.join(ROOT, "build_backend", "permitd_build.py"))
        self.assertGreater(len(files), 5)
        for path in files:
            with open(path, encoding="utf-8") as f:
                src = f.read()
            ast.parse(src, path, feature_version=(3, 9))
            # Library calls newer than 3.9 (the syntax check above does not
            # see them).
            for bad in ("asyncio.timeout(", "asyncio.TaskGroup", "ExceptionGroup", "strict=True", "kw_only=", "slots=True"):
                self.assertNotIn(bad, src, "%s uses %s (Python > 3.9)" % (path, bad))

    def test_no_third_party_imports(self) -> None:
        stdlib = set(getattr(sys, "stdlib_module_names", ())) or {  # Python >= 3.10 knows its own
            "asyncio", "concurrent", "datetime", "functools", "http", "inspect", "json", "os", "random",
            "re", "secrets", "socket", "ssl", "threading", "time", "typing", "urllib", "weakref",
        }
        stdlib.add("__future__")
        for f in sorted(os.listdir(PKG)):
            if not f.endswith(".py"):
                continue
            with open(os.path.join(PKG, f), encoding="utf-8") as fh:
                tree = ast.parse(fh.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    names = [node.module or ""]
                else:
                    continue
                for n in names:
                    self.assertIn(n.split(".")[0], stdlib, "%s imports %s" % (f, n))

    def test_version_is_stated_once(self) -> None:
        with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
            m = re.search(r'^version = "([^"]+)"', f.read(), re.M)
        self.assertIsNotNone(m)
        self.assertEqual(m.group(1), permitd.__version__)

    def test_public_api_is_documented(self) -> None:
        self.assertGreater(len(permitd.__doc__ or ""), 500)
        for name in permitd.__all__:
            obj = getattr(permitd, name)
            if name.startswith("__") or isinstance(obj, str):
                continue
            self.assertTrue(inspect.getdoc(obj), name)
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    if attr.startswith("_") or not callable(member) and not isinstance(member, property):
                        continue
                    self.assertTrue(inspect.getdoc(member), "%s.%s" % (name, attr))


if __name__ == "__main__":
    unittest.main()
