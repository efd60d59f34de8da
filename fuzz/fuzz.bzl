"""plimsoll_fuzz_target: one libFuzzer target, its corpus replay test, and the same code under gcc.

With `--config=fuzz` (clang, tools/fuzz.sh) `<name>` is a libFuzzer binary. Without it (gcc, the
normal build) `<name>` is linked with replay_main.cc instead: it runs the inputs given as files or
directories once each, so `bazel-bin/fuzz/<name> crash-file` reproduces a crash without clang.
`<name>_corpus_test` replays the committed seed corpus, fuzz/corpus/<name>/, in `bazel test //...`
(under ASan/UBSan: `tools/sanitize.sh //fuzz/...`; the full suite leaves that to tools/fuzz.sh,
whose libFuzzer runs every seed first), so every input that once crashed stays a test.
"""

load("//bazel:copts.bzl", "PLIMSOLL_COPTS")

def plimsoll_fuzz_target(name, srcs, deps = []):
    corpus = native.glob(["corpus/%s/*" % name])
    native.cc_binary(
        name = name,
        srcs = srcs + ["fuzz_check.h"] + select({
            ":fuzzing": [],
            "//conditions:default": ["replay_main.cc"],
        }),
        copts = PLIMSOLL_COPTS,
        linkopts = select({
            ":fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        deps = deps,
        tags = ["fuzz_target"],
    )
    native.cc_test(
        name = name + "_corpus_test",
        size = "small",
        srcs = srcs + ["fuzz_check.h", "replay_main.cc"],
        copts = PLIMSOLL_COPTS,
        args = ["fuzz/corpus/" + name],
        data = corpus,
        deps = deps,
    )
