"""Coverage-guided fuzzing of one target with atheris (libFuzzer).

    python -m tests.fuzz.run_atheris entry_codec -max_total_time=60 [corpus dir]

libFuzzer's own flags pass through. Any exception other than the refusals a
target allows is a crash: atheris prints the input and exits non-zero.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports(include=["quire_common", "quire_gateway", "quire_registry", "quire"]):
    from tests.fuzz.targets import TARGETS


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        sys.exit(f"usage: run_atheris.py {{{'|'.join(TARGETS)}}} [libFuzzer flags]")
    target = TARGETS[sys.argv[1]]
    atheris.Setup([sys.argv[0], *sys.argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
