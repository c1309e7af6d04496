"""shardps.Client against real ps daemons: round trips, zero-copy, bad input (refused with an
exception naming the argument, the ps state unchanged), typed errors, the GIL, Ctrl-C."""

import os
import signal
import threading
import time
import unittest

import numpy as np

import shardps
from cluster import PsCluster

SGD1 = {"type": "sgd", "learning_rate": 1.0}


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = PsCluster(2)
        cls.client = shardps.Client(cls.cluster.addresses)
        cls.client.create_variables([
            shardps.Variable("w", (6, 4), initializer={"type": "constant", "value": 0.5},
                             optimizer=SGD1),
            shardps.Variable("b", (4,), optimizer=SGD1),
            shardps.Variable("table", (10, 3), initializer={"type": "constant", "value": 1},
                             optimizer=SGD1),
            shardps.Variable("hashed", (None, 2), initializer="zeros", optimizer=SGD1),
        ], partitioner="fixed:2")

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.cluster.close()

    def test_layout_follows_the_partitioner(self):
        layout = self.client.layout("w")
        self.assertEqual(layout["shape"], (6, 4))
        self.assertEqual([(s["ps"], s["rows"]) for s in layout["shards"]], [(0, 3), (1, 3)])
        self.assertTrue(self.client.layout("hashed")["dynamic"])
        self.assertEqual(sorted(self.client.variables()), ["b", "hashed", "table", "w"])

    def test_dense_pull_push(self):
        before = self.client.pull("b")
        self.assertEqual((before.dtype, before.shape), (np.float32, (4,)))
        grad = np.array([1, 2, 3, 4], np.float32)
        self.client.push("b", grad)
        np.testing.assert_array_equal(self.client.pull("b"), before - grad)

    def test_pull_into_out_is_the_same_buffer(self):
        out = np.zeros((6, 4), np.float32)
        result = self.client.pull("w", out=out)
        self.assertIs(result, out)
        np.testing.assert_array_equal(out, np.full((6, 4), 0.5, np.float32))

    def test_pulled_array_owns_the_c_buffer(self):
        a = self.client.pull("w")
        b = self.client.pull("w")
        self.assertFalse(np.shares_memory(a, b))
        self.assertTrue(a.flags.c_contiguous and a.flags.writeable)
        self.assertIsNotNone(a.base)  # the capsule-owned C++ buffer, not a numpy copy

    def test_pull_many_and_versions(self):
        versions = shardps.Versions()
        values = self.client.pull_many(["w", "b"], versions=versions)
        self.assertEqual(values["w"].shape, (6, 4))
        self.assertEqual(values["b"].shape, (4,))
        self.assertGreaterEqual(versions.max_version, versions.min_version)
        self.assertEqual(set(versions.shards), {"w/part_0", "w/part_1", "b/part_0", "b/part_1"})

    def test_rows_round_trip_and_duplicates_summed(self):
        ids = np.array([7, 2, 7], np.int64)
        before = self.client.pull_rows("table", ids)
        self.assertEqual(before.shape, (3, 3))
        grads = np.ones((3, 3), np.float32)
        self.client.push_rows("table", [7, 2, 7], grads)  # a list of ids is cast to int64
        after = self.client.pull_rows("table", [7, 2])
        np.testing.assert_array_equal(after[0], before[0] - 2)  # id 7 twice: summed
        np.testing.assert_array_equal(after[1], before[1] - 1)

    def test_dynamic_table_takes_any_int64_and_uint64_keys(self):
        keys = np.array([1 << 40, 3, (1 << 64) - 1], np.uint64)
        self.client.push_rows("hashed", keys, np.full((3, 2), -1, np.float32))
        rows = self.client.pull_rows("hashed", keys)
        np.testing.assert_array_equal(rows, np.ones((3, 2), np.float32))
        self.assertEqual(self.client.pull_rows("hashed", []).shape, (0, 2))

    def _state(self):
        return {n: self.client.pull(n).tobytes() for n in ("w", "b")}, \
               self.client.pull_rows("table", np.arange(10)).tobytes()

    def test_bad_input_names_the_argument_and_changes_nothing(self):
        state = self._state()
        cases = [
            (lambda: self.client.push("b", np.ones(4, np.float64)), 'grads["b"]', "float32"),
            (lambda: self.client.push("w", np.ones((4, 6), np.float32).T), 'grads["w"]',
             "C-contiguous"),
            (lambda: self.client.push("b", np.ones(5, np.float32)), 'grads["b"]', "4 elements"),
            (lambda: self.client.push("b", [1.0, 2.0, 3.0, 4.0]), 'grads["b"]', "numpy array"),
            (lambda: self.client.pull("b", out=np.zeros(4, np.float64)), 'out["b"]', "float32"),
            (lambda: self.client.push_rows("table", [1, 2], np.ones((2, 2), np.float32)),
             'grads["table"]', "6 elements"),
            (lambda: self.client.pull_rows("table", [0.5]), 'ids["table"]', "integer"),
            (lambda: self.client.push("hashed", np.ones(2, np.float32)), "hashed", "dynamic"),
        ]
        for call, arg, what in cases:
            with self.assertRaises(shardps.InvalidArgument) as raised:
                call()
            self.assertIn(arg, str(raised.exception))
            self.assertIn(what, str(raised.exception))
        with self.assertRaises(shardps.InvalidArgument) as raised:  # the ps refuses it
            self.client.push_rows("table", [3, 10], np.ones((2, 3), np.float32))
        self.assertIn("10", str(raised.exception))
        with self.assertRaises(shardps.NotFound) as raised:
            self.client.pull("no_such_variable")
        self.assertIn("no_such_variable", str(raised.exception))
        self.assertEqual(self._state(), state)

    def test_bad_variable_spec_names_the_field(self):
        with self.assertRaises(shardps.InvalidArgument) as raised:
            self.client.create_variables(
                [shardps.Variable("v", (2,), optimizer={"type": "adam", "learning_rat": 1})])
        self.assertIn('variables[0] ("v"): unknown field "optimizer.learning_rat" '
                      '(did you mean "optimizer.learning_rate"?)', str(raised.exception))
        with self.assertRaises(shardps.InvalidArgument) as raised:
            self.client.create_variables([shardps.Variable("v", (2,), optimizer="adma")])
        self.assertIn('variables[0] ("v"): "optimizer.type"', str(raised.exception))
        with self.assertRaises(shardps.InvalidArgument) as raised:
            self.client.create_variables([shardps.Variable("v", (2,))], partitioner="fixd:2")
        self.assertIn("fixd", str(raised.exception))
        self.assertNotIn("v", self.client.variables())

    def test_waits_release_the_gil(self):
        # A pull waiting for a version no shard reaches holds no GIL: this thread counts on.
        counted = []
        stop = threading.Event()

        def count():
            n = 0
            while not stop.is_set():
                n += 1
            counted.append(n)

        t = threading.Thread(target=count)
        t.start()
        start = time.monotonic()
        with self.assertRaises(shardps.DeadlineExceeded):
            self.client.pull("b", min_version=1 << 40, wait_timeout=0.5)
        stop.set()
        t.join()
        self.assertGreaterEqual(time.monotonic() - start, 0.4)
        self.assertGreater(counted[0], 10000)

    def test_ctrl_c_interrupts_a_wait(self):
        timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
        timer.start()
        start = time.monotonic()
        with self.assertRaises(KeyboardInterrupt):
            self.client.pull("b", min_version=1 << 40, wait_timeout=3)
        self.assertLess(time.monotonic() - start, 1.3)
        timer.join()
        self.assertEqual(self.client.pull("b").shape, (4,))  # the client still works


class PsLossTest(unittest.TestCase):
    def test_unreachable_then_restarted_ps(self):
        cluster = PsCluster(2)
        try:
            with shardps.Client(cluster.addresses, rpc_timeout=2, max_attempts=1) as client:
                client.create_variables([shardps.Variable("v", (4, 2))], partitioner="fixed:2")
                cluster.kill(1)
                with self.assertRaises(shardps.PsUnavailable) as raised:
                    client.pull("v")
                self.assertEqual(raised.exception.ps_task, 1)
                self.assertIn("ps:1", str(raised.exception))
                cluster.restart(1)
                with self.assertRaises(shardps.PsStateLost) as raised:
                    client.pull("v")
                self.assertEqual(raised.exception.ps_task, 1)
        finally:
            cluster.close()


if __name__ == "__main__":
    unittest.main()
