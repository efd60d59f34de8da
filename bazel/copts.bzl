"""Compiler options shared by every target we own: warnings are errors, in one place."""

PLIMSOLL_COPTS = [
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wno-unused-parameter",
    "-Wno-sign-compare",
]
