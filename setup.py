"""setuptools glue for the one thing pyproject.toml cannot say: the library is
assembled by build.py (nasm + ld) while the package is built, and the wheel is a
platform wheel (py3-none-linux_x86_64: the package loads libasmbpe.so through
cffi's ABI mode, so it does not depend on the Python version, only on the CPU).

- `pip install .` / `pip wheel .` / `python -m build`: build_py puts libasmbpe.so,
  asmbpe.h and _ffi.py (the declarations the loader imports) into the wheel's
  staging directory (build/lib/harness/); cffi is a build requirement for _ffi.py.
- `pip install -e .`: build_py builds them in place (harness/), as `python build.py`
  does; rerun `python build.py` after editing asm/.
"""
from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:                                        # setuptools >= 70.1
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:                         # pragma: no cover - older setuptools
    from wheel.bdist_wheel import bdist_wheel

ROOT = Path(__file__).resolve().parent


def _asm_build():
    """build.py as a module (not `import build`: that name is PyPA's build tool)."""
    spec = importlib.util.spec_from_file_location("asmbpe_build", ROOT / "build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class BuildPyWithLibrary(build_py):
    def run(self):
        editable = getattr(self, "editable_mode", False)
        if not editable:                    # no module of an earlier build in this wheel
            shutil.rmtree(Path(self.build_lib) / "harness", ignore_errors=True)
        super().run()
        asm = _asm_build()
        out = asm.PKG if editable else Path(self.build_lib) / "harness"
        try:
            asm.build(out=out, test=editable)
        except asm.BuildError as e:
            sys.exit(f"asmbpe: building libasmbpe.so failed: {e}")


class BinaryDistribution(Distribution):
    def has_ext_modules(self):              # it carries libasmbpe.so: platlib, not pure
        return True


class PlatformWheel(bdist_wheel):
    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


setup(distclass=BinaryDistribution,
      cmdclass={"build_py": BuildPyWithLibrary, "bdist_wheel": PlatformWheel})
