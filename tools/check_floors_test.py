"""The floor checker on the repository itself and on fixture trees that break each rule."""

import os
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # the module lives in the source tree: leave no __pycache__ there
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import check_floors  # noqa: E402

TABLE = """
# a comment
0 proto
1 common
2 math compute
3 model
4 model/plugin
5 worker
"""


class FixtureTree:
    """A repository in a temporary directory: files given as {path: text}."""

    def __init__(self, files):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name
        for path, text in files.items():
            full = os.path.join(self.root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w", encoding="utf-8") as f:
                f.write(text)

    def check(self, table=TABLE):
        return check_floors.check(self.root, check_floors.parse_table(table))

    def cleanup(self):
        self.dir.cleanup()


class CheckFloorsTest(unittest.TestCase):
    def errors(self, files, table=TABLE):
        base = {"proto/a.proto": "", "common/c.h": "", "math/m.h": "", "compute/d.h": "",
                "model/x.h": "", "model/plugin/p.cc": "", "worker/w.cc": ""}
        base.update(files)
        tree = FixtureTree(base)
        try:
            return tree.check(table)
        finally:
            tree.cleanup()

    def test_the_repository_keeps_its_floors(self):
        root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
        with open(os.path.join(root, "tools", "floors.txt"), encoding="utf-8") as f:
            floors = check_floors.parse_table(f.read())
        self.assertEqual(check_floors.check(root, floors), [])

    def test_lower_floors_and_its_own_folder_are_fine(self):
        self.assertEqual(self.errors({
            "model/y.h": '#include "model/x.h"\n#include "math/m.h"\n#include "common/c.h"\n',
            "model/sub/z.cc": '#include "model/y.h"\n#include "proto/a.pb.h"\n',
            "model/plugin/q.cc": '#include "model/x.h"\n#include "model/plugin/p.h"\n',
            "worker/v.cc": '#include <vector>\n#include "absl/status/status.h"\n#include "x.h"\n',
        }), [])

    def test_a_climbing_include_is_caught(self):
        errors = self.errors({"math/n.cc": '#include <cmath>\n\n#include "model/x.h"\n'})
        self.assertEqual(len(errors), 1, errors)
        self.assertIn("math/n.cc:3", errors[0])
        self.assertIn("model/x.h", errors[0])
        self.assertIn("higher floor", errors[0])

    def test_a_folder_with_its_own_floor_is_above_its_parent(self):
        errors = self.errors({"model/y.cc": '#include "model/plugin/p.h"\n'})
        self.assertEqual(len(errors), 1, errors)
        self.assertIn("model/plugin/", errors[0])

    def test_another_folder_on_the_same_floor_is_caught(self):
        errors = self.errors({"math/n.h": '#include "compute/d.h"\n'})
        self.assertEqual(len(errors), 1, errors)
        self.assertIn("same floor", errors[0])

    def test_a_proto_import_is_checked(self):
        errors = self.errors({"proto/b.proto": 'import "common/c.proto";\n'})
        self.assertEqual(len(errors), 1, errors)
        self.assertIn("proto/b.proto:1", errors[0])

    def test_a_test_may_include_any_floor(self):
        self.assertEqual(self.errors({"math/n_test.cc": '#include "worker/w.h"\n'}), [])

    def test_an_unlisted_top_level_folder_is_an_error_that_says_to_list_it(self):
        errors = self.errors({"newpkg/n.h": "", "math/n.h": '#include "newpkg/n.h"\n'})
        self.assertEqual(len(errors), 2, errors)
        self.assertTrue(any(e.startswith("newpkg/:") and "add it" in e for e in errors), errors)
        self.assertTrue(any(e.startswith("math/n.h:1") and "add it" in e for e in errors), errors)

    def test_a_folder_the_gitignore_ignores_is_no_code(self):
        # The main job's run directories (runs/, in .gitignore) are not an unlisted folder.
        self.assertEqual(self.errors({".gitignore": "/runs/\n*.pb.cc\n", "runs/x/log.txt": "",
                                      "runs/y.cc": ""}), [])
        self.assertEqual(len(self.errors({"runs/y.cc": ""})), 1)

    def test_a_bad_table_is_refused(self):
        with self.assertRaisesRegex(ValueError, "line 1"):
            check_floors.parse_table("proto 0\n")
        with self.assertRaisesRegex(ValueError, "twice"):
            check_floors.parse_table("0 proto\n1 proto\n")


if __name__ == "__main__":
    unittest.main()
