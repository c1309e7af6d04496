#!/usr/bin/env python3
"""check_links.py on fixture trees: what it reports and what it lets pass."""

import os
import sys
import tempfile
import time
import unittest

sys.dont_write_bytecode = True  # the module lives in the source tree: leave no __pycache__ there
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import check_links  # noqa: E402

BASE = {
    "WORKSPACE": "",
    "BUILD.bazel": 'sh_test(\n    name = "docs_links_test",\n)\n',
    "docs/design.md": "# Design\n\n## Floors\n",
    "ps_server/BUILD.bazel": 'cc_binary(\n    name = "ps",\n)\ncc_test(name = "shard_test")\n',
    "ps_server/shard_store.h": "",
    "ps_server/rpc/BUILD.bazel": 'cc_library(name = "rpc")\n',
    "tests/BUILD.bazel": 'cc_test(\n    name = "netns_test",\n)\n',
    "worker/BUILD.bazel": 'cc_binary(name = "worker")\n',
}


class CheckLinksTest(unittest.TestCase):
    def problems(self, readme, files=None, tree=True):
        """What check_links reports on a fixture tree whose README.md is `readme`."""
        with tempfile.TemporaryDirectory() as root:
            for path, text in {**BASE, **(files or {}), "README.md": readme}.items():
                full = os.path.join(root, path)
                os.makedirs(os.path.dirname(full), exist_ok=True)
                with open(full, "w", encoding="utf-8") as f:
                    f.write(text)
            problems = []
            check_links.check_docs(root, problems)
            if tree:
                check_links.check_tree(root, problems)
                check_links.check_mentions(root, problems)
            return problems

    def test_paths_that_exist_pass(self):
        self.assertEqual(self.problems(
            "Start at `ps_server/shard_store.h`, then ps_server/rpc/ and `ps_server/`.\n"
            "```sh\ncat ps_server/shard_store.h   # a path in a code block\n```\n"), [])

    def test_a_path_that_does_not_exist_is_reported_in_prose_spans_and_blocks(self):
        problems = self.problems(
            "Read `ps_server/optimizer.h`.\n"
            "Then worker/compute/backend.h.\n"
            "```sh\ncat ps_server/parallel_for.h\n```\n")
        self.assertEqual(len(problems), 3, problems)
        self.assertIn("README.md:1: ps_server/optimizer.h: no such file", problems[0])
        self.assertIn("README.md:2: worker/compute/backend.h", problems[1])
        self.assertIn("README.md:4: ps_server/parallel_for.h", problems[2])

    def test_a_target_written_as_a_path_passes_and_a_missing_one_does_not(self):
        self.assertEqual(
            self.problems("`tests/netns_test` runs it; so does ps_server/shard_test.\n"), [])
        problems = self.problems("`tests/gpu_backend_test` runs it.\n")
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("tests/gpu_backend_test", problems[0])

    def test_sentence_punctuation_and_patterns_are_not_part_of_a_path(self):
        self.assertEqual(self.problems(
            "It is in ps_server/shard_store.h. See `ps_server/*.h`, `tests/<name>_test` and\n"
            "ps_server/{a,b}.h; /usr/ps_server/x.h and https://example.com/ps_server/x.h are\n"
            "not ours, nor is --dir=/tmp/tests/x or $dir/tests/x.\n"), [])

    def test_a_rate_or_fraction_after_a_folder_name_is_prose(self):
        self.assertEqual(self.problems(
            "It trains at 3000 tests/s, a third of them (tests/3).\n"), [])
        self.assertEqual(len(self.problems("See tests/abc.\n")), 1)

    def test_a_flag_value_is_a_path_too(self):
        problems = self.problems("`chief --job=tests/gone.json`\n")
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("tests/gone.json", problems[0])

    def test_labels_that_resolve_pass(self):
        self.assertEqual(self.problems(
            "`bazel build //ps_server:ps //worker` and `bazel test //ps_server/... //...\n"
            "//:docs_links_test //ps_server:shard_store.h`\n"
            "```cpp\nclient->Push(x);  // a comment, not a label\n```\n"), [])

    def test_labels_that_do_not_resolve_are_reported(self):
        problems = self.problems(
            "`bazel run //bench:transport_bench`, `bazel test //ps_server:gpu_backend_test`,\n"
            "`//ps_server:ps //client/... //:nope`\n")
        self.assertEqual(len(problems), 4, problems)
        self.assertIn("//bench:transport_bench: no BUILD file", problems[0])
        self.assertIn("//ps_server:gpu_backend_test: no target gpu_backend_test", problems[1])
        self.assertIn("//client/...: no such folder", problems[2])
        self.assertIn("//:nope: no target nope in the root", problems[3])

    def test_links_and_anchors_are_still_checked(self):
        problems = self.problems("[a](docs/design.md#floors) [b](docs/design.md#nope) "
                                 "[c](docs/gone.md)\n")
        self.assertEqual(len(problems), 2, problems)
        self.assertIn("no heading for #nope", problems[0])
        self.assertIn("no such file: docs/gone.md", problems[1])

    def test_an_unclosed_bracket_over_many_lines_is_read_at_once(self):
        # A half-open range "[2047, 2048)" and 40 lines with no "]" after it: the link pattern
        # once backtracked over every way of splitting the newlines (minutes), and a link
        # after it must still be checked.
        text = "buckets [2047, 2048) moved\n" + "prose line\n" * 40 + "[c](docs/gone.md)\n"
        start = time.monotonic()
        problems = self.problems(text, tree=False)
        self.assertLess(time.monotonic() - start, 5.0)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("no such file: docs/gone.md", problems[0])

    def test_paths_are_checked_only_with_the_tree(self):
        self.assertEqual(self.problems("`ps_server/optimizer.h`\n", tree=False), [])


if __name__ == "__main__":
    unittest.main()
