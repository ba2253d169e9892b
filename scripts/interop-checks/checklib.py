"""A tiny check runner: each check is a function; a failure names the check and why."""

import sys
import traceback

_checks = []


def check(function):
    _checks.append(function)
    return function


def run(suite):
    passed = failed = 0
    for function in _checks:
        name = f"{suite}: {function.__doc__ or function.__name__}"
        try:
            function()
        except Exception as error:  # noqa: BLE001 - every failure is reported, none stops the others
            failed += 1
            print(f"FAIL  {name}\n      {type(error).__name__}: {error}", flush=True)
            if "-v" in sys.argv:
                traceback.print_exc()
        else:
            passed += 1
            print(f"ok    {name}", flush=True)
    print(f"{suite}: {passed} passed, {failed} failed", flush=True)
    return 0 if failed == 0 else 1


def expect(condition, message):
    if not condition:
        raise AssertionError(message)
