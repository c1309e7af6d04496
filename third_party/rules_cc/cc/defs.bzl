"""Stand-in for rules_cc compatible with Bazel 4.2.3: thin wrappers over the native rules.

Debian's rules_cc 0.0.4 loads use_cpp_toolchain, which Bazel 4.2.3 lacks.
"""

def cc_library(**kwargs):
    native.cc_library(**kwargs)

def cc_binary(**kwargs):
    native.cc_binary(**kwargs)

def cc_test(**kwargs):
    native.cc_test(**kwargs)

def cc_import(**kwargs):
    native.cc_import(**kwargs)

def cc_toolchain(**kwargs):
    native.cc_toolchain(**kwargs)

def cc_toolchain_suite(**kwargs):
    native.cc_toolchain_suite(**kwargs)
