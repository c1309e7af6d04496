"""Runs the unittest cases of one test module and writes them to Bazel's test.xml.

usage: run_unittest.py MODULE.py

Each case becomes a <testcase> in the form GoogleTest writes (result="skipped" with a
<skipped message=...> for a skipped one), so deploy/test.sh counts a module whose every case
skipped as skipped. With SHARDPS_SKIP_ALL set (no virtualenv) every case is skipped with that
reason, without importing the module's dependencies. Exits 1 when a case failed.
"""

import importlib.util
import os
import sys
import time
import traceback
import unittest
from xml.sax.saxutils import quoteattr


class _Result(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cases = []  # (class, name, seconds, outcome, message)
        self._start = 0.0

    def startTest(self, test):
        self._start = time.monotonic()
        super().startTest(test)

    def _add(self, test, outcome, message=""):
        cls = type(test).__name__
        name = getattr(test, "_testMethodName", str(test))
        self.cases.append((cls, name, time.monotonic() - self._start, outcome, message))

    def addSuccess(self, test):
        super().addSuccess(test)
        self._add(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._add(test, "failed", "".join(traceback.format_exception(*err)))

    def addError(self, test, err):
        super().addError(test, err)
        self._add(test, "failed", "".join(traceback.format_exception(*err)))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._add(test, "skipped", reason)


def write_xml(path, suite_name, cases):
    failures = sum(1 for c in cases if c[3] == "failed")
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             f'<testsuites tests="{len(cases)}" failures="{failures}" name="AllTests">',
             f'  <testsuite name={quoteattr(suite_name)} tests="{len(cases)}" '
             f'failures="{failures}">']
    for cls, name, seconds, outcome, message in cases:
        result = "skipped" if outcome == "skipped" else "completed"
        head = (f'    <testcase name={quoteattr(name)} status="run" result="{result}" '
                f'time="{seconds:.3f}" classname={quoteattr(cls)}>')
        lines.append(head)
        if outcome == "skipped":
            lines.append(f"      <skipped message={quoteattr(message)}/>")
        elif outcome == "failed":
            lines.append(f"      <failure message={quoteattr(message[-2000:])}/>")
        lines.append("    </testcase>")
    lines += ["  </testsuite>", "</testsuites>", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main(module_path):
    name = os.path.splitext(os.path.basename(module_path))[0]
    xml = os.environ.get("XML_OUTPUT_FILE")
    skip_all = os.environ.get("SHARDPS_SKIP_ALL")
    if skip_all:
        print(f"SKIPPED: {skip_all}")
        if xml:
            write_xml(xml, name, [(name, "all", 0.0, "skipped", skip_all)])
        return 0
    sys.path.insert(0, os.path.dirname(module_path))
    spec = importlib.util.spec_from_file_location(name, module_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    runner = unittest.TextTestRunner(stream=sys.stdout, verbosity=2, resultclass=_Result)
    result = runner.run(suite)
    if xml:
        write_xml(xml, name, result.cases)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
