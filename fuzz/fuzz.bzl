"""shardps_fuzzer: one libFuzzer target, its corpus replayed as a test, and its CI run."""

load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_library", "cc_test")

def shardps_fuzzer(name, srcs, deps, max_len, runs):
    """A fuzz target NAME (LLVMFuzzerTestOneInput in srcs) and its seed corpus corpus/NAME/.

    Makes:
      NAME              the fuzzer: under --config=clang-asan linked with -fsanitize=fuzzer
                        (libFuzzer's main; fuzz/run.sh runs it), else with replay_main.cc
      NAME_corpus_test  cc_test: every corpus file fed to the target once (both compilers)
      NAME_fuzz_test    sh_test, tags manual and fuzz: libFuzzer for `runs` executions with
                        -seed=1 from the corpus, inputs of at most `max_len` bytes; the
                        clang stage of deploy/test.sh runs it

    Args:
      name: the target's name, e.g. "tf_config_fuzzer".
      srcs: the file defining LLVMFuzzerTestOneInput.
      deps: what it calls.
      max_len: -max_len of the CI run (bytes).
      runs: -runs of the CI run (executions).
    """
    corpus = native.glob(["corpus/%s/**" % name])
    cc_library(
        name = name + "_lib",
        srcs = srcs,
        deps = deps,
        alwayslink = True,
    )
    cc_binary(
        name = name,
        linkopts = select({
            "//tools:clang": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        deps = [":" + name + "_lib"] + select({
            "//tools:clang": [],
            "//conditions:default": [":replay_main"],
        }),
    )
    cc_test(
        name = name + "_corpus_test",
        size = "small",
        args = ["fuzz/corpus/" + name],
        data = corpus,
        deps = [
            ":" + name + "_lib",
            ":replay_main",
        ],
    )
    native.sh_test(
        name = name + "_fuzz_test",
        size = "medium",
        srcs = ["fuzz_test.sh"],
        args = [
            "$(rootpath :%s)" % name,
            "fuzz/corpus/" + name,
            str(runs),
            str(max_len),
        ],
        data = [":" + name] + corpus,
        tags = [
            "fuzz",
            "manual",
        ],
    )
