"""shardps.errors: a status' code and typed detail choose the exception class."""

import unittest

import shardps
from shardps import errors


class ErrorsTest(unittest.TestCase):
    def test_detail_kind_wins_over_code(self):
        e = errors.from_status("ps:1 (h:2): unreachable",
                               {"code": "DEADLINE_EXCEEDED", "kind": "PS_UNAVAILABLE",
                                "ps_task": 1})
        self.assertIsInstance(e, shardps.PsUnavailable)
        self.assertIsInstance(e, ConnectionError)
        self.assertEqual((e.code, e.kind, e.ps_task), ("DEADLINE_EXCEEDED", "PS_UNAVAILABLE", 1))
        self.assertEqual(str(e), "ps:1 (h:2): unreachable")

    def test_code_classes_are_builtin_kinds_too(self):
        cases = {"INVALID_ARGUMENT": ValueError, "OUT_OF_RANGE": ValueError,
                 "NOT_FOUND": LookupError, "DEADLINE_EXCEEDED": TimeoutError,
                 "UNAVAILABLE": ConnectionError, "PERMISSION_DENIED": PermissionError,
                 "UNIMPLEMENTED": NotImplementedError}
        for code, builtin in cases.items():
            e = errors.from_status("m", {"code": code, "kind": "UNSPECIFIED"})
            self.assertIsInstance(e, builtin, code)
            self.assertIsInstance(e, shardps.Error, code)
            self.assertEqual(e.code, code)

    def test_every_kind_has_its_class(self):
        kinds = {"PS_UNAVAILABLE": shardps.PsUnavailable, "PS_STATE_LOST": shardps.PsStateLost,
                 "STALE_GENERATION": shardps.StaleGeneration, "STALE_STEP": shardps.StaleStep,
                 "UNKNOWN_JOB": shardps.UnknownJob,
                 "CHECKPOINT_CORRUPT": shardps.CheckpointCorrupt,
                 "LIMIT": shardps.LimitExceeded, "PROTOCOL_MISMATCH": shardps.ProtocolMismatch}
        for kind, cls in kinds.items():
            self.assertIs(type(errors.from_status("m", {"code": "ABORTED", "kind": kind})), cls)

    def test_use_tls_names_the_file_it_cannot_read(self):
        with self.assertRaises(shardps.InvalidArgument) as caught:
            shardps.use_tls("/nonexistent/ca.crt")
        self.assertIn("/nonexistent/ca.crt", str(caught.exception))
        self.assertIn("--tls_ca_file", str(caught.exception))
        with self.assertRaises(shardps.InvalidArgument) as caught:
            shardps.use_tls("/nonexistent/ca.crt", cert_file="/c.crt")
        self.assertIn("--tls_key_file", str(caught.exception))

    def test_stale_generation_carries_the_generation(self):
        e = errors.from_status("stale", {"code": "ABORTED", "kind": "STALE_GENERATION",
                                         "generation": 7})
        self.assertIsInstance(e, shardps.Aborted)
        self.assertEqual(e.generation, 7)
        self.assertIsNone(e.ps_task)

    def test_unknown_code_is_unknown(self):
        self.assertIs(type(errors.from_status("m", {"code": "NO_SUCH", "kind": "NO_SUCH"})),
                      shardps.Unknown)


if __name__ == "__main__":
    unittest.main()
