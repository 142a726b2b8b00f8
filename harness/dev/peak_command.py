"""`python -m harness.dev.peak_command PEAK_PATH -- ARGS...`: runs `asmbpe ARGS` in this
process and, as it exits, writes the whole process's peak RSS (VmHWM in bytes, new at
exec, so this process's own; ru_maxrss where /proc is missing) to PEAK_PATH as a
decimal number. `asmbpe bench train` times the whole `asmbpe train` command through it:
it imports nothing the command does not (the bench's own module, with argparse,
subprocess and statistics, cost the command about 10 ms more)."""
from __future__ import annotations

import atexit
import sys


def vm_hwm() -> int | None:
    """This process's peak RSS so far (VmHWM, bytes), None where /proc has no status."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def peak_rss() -> int:
    """This process's peak RSS in bytes: VmHWM, else ru_maxrss."""
    hwm = vm_hwm()
    if hwm is not None:
        return hwm
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    peak_path, args = argv[0], argv[2:]             # PEAK_PATH -- ARGS...

    def write_peak() -> None:
        with open(peak_path, "w") as f:
            f.write(str(peak_rss()))

    atexit.register(write_peak)
    from ..cli import main as cli_main
    cli_main(args)


if __name__ == "__main__":
    main()
