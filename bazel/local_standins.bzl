"""Local stand-ins for repositories that Bazel 4.2.3's WORKSPACE suffix would download.

Why: Debian's bazel-bootstrap still names rules_cc, rules_java and
remote_coverage_tools in its built-in WORKSPACE suffix, and every cc_test
depends on remote_coverage_tools implicitly. We build fully offline, so the
first declaration of each name (ours) must satisfy Bazel without a download.
"""

def _rules_cc_impl(ctx):
    ctx.file("BUILD.bazel", "")
    ctx.file("cc/BUILD.bazel", "")
    ctx.file("cc/defs.bzl", "\n".join([
        "def cc_binary(**kw): native.cc_binary(**kw)",
        "def cc_library(**kw): native.cc_library(**kw)",
        "def cc_test(**kw): native.cc_test(**kw)",
        "def cc_import(**kw): native.cc_import(**kw)",
        "def cc_proto_library(**kw): native.cc_proto_library(**kw)",
        "def cc_toolchain(**kw): native.cc_toolchain(**kw)",
        "def cc_toolchain_suite(**kw): native.cc_toolchain_suite(**kw)",
        "def fdo_profile(**kw): native.fdo_profile(**kw)",
        "def fdo_prefetch_hints(**kw): native.fdo_prefetch_hints(**kw)",
        "def objc_library(**kw): native.objc_library(**kw)",
        "def objc_import(**kw): native.objc_import(**kw)",
        "def propeller_optimize(**kw): native.propeller_optimize(**kw)",
        "",
    ]))

def _rules_java_impl(ctx):
    ctx.file("BUILD.bazel", "")
    ctx.file("java/BUILD.bazel", "")
    ctx.file("java/defs.bzl", "\n".join([
        "def java_binary(**kw): native.java_binary(**kw)",
        "def java_library(**kw): native.java_library(**kw)",
        "def java_import(**kw): native.java_import(**kw)",
        "def java_test(**kw): native.java_test(**kw)",
        "def java_plugin(**kw): native.java_plugin(**kw)",
        "def java_runtime(**kw): native.java_runtime(**kw)",
        "def java_toolchain(**kw): native.java_toolchain(**kw)",
        "def java_package_configuration(**kw): native.java_package_configuration(**kw)",
        "def java_lite_proto_library(**kw): native.java_lite_proto_library(**kw)",
        "def java_proto_library(**kw): native.java_proto_library(**kw)",
        "",
    ]))

def _coverage_tools_impl(ctx):
    # `bazel coverage` is unavailable offline; plain builds and tests only need the labels.
    ctx.file("BUILD.bazel", "\n".join([
        'package(default_visibility = ["//visibility:public"])',
        'filegroup(name = "coverage_report_generator", srcs = [])',
        'filegroup(name = "lcov_merger", srcs = [])',
        'filegroup(name = "Main", srcs = [])',
        "",
    ]))

rules_cc_standin = repository_rule(implementation = _rules_cc_impl)
rules_java_standin = repository_rule(implementation = _rules_java_impl)
coverage_tools_standin = repository_rule(implementation = _coverage_tools_impl)
