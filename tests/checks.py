"""checks.py: what the Python tests share (test_install, test_mpi, test_package,
test_prediction_check, test_search_select): a check that prints ok or FAIL and keeps the
failures, the line that ends a run, and running a command that must succeed. Python standard
library only; each test sets NAME first."""
import subprocess
import sys

NAME = "test"  # the test's name, for its messages
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def fail(msg):
    print(f"{NAME}: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def run(cmd, ok=True, **kw):
    """Run cmd (a list), its output captured as text; with ok, a nonzero exit fails the test."""
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if ok and p.returncode != 0:
        fail(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    return p


def finish():
    """End a run of checks: exit 1 naming the failed ones, or say that all passed."""
    if failures:
        sys.exit(f"{NAME}: {len(failures)} failed: {failures}")
    print(f"{NAME}: all passed")
