"""Builds cobaltlite/_speedups.c (Qsim's compiled job log and series and the EASY pass's filter,
cobaltlite/compiled.py) into the wheel, or into the source tree for an editable install, with
the C compiler Python was built with (or $CC). Without a compiler, or if the build fails, the
install goes on with a one-line warning and cobaltlite runs its pure-Python twins (the same
output, slower); COBALTLITE_PURE_BUILD=1 skips the build on purpose."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = Path("cobaltlite") / "_speedups.c"


def _warn(why: str) -> None:
    print(f"cobaltlite: warning: {why}; the compiled parts (Qsim's job log and series, the "
          "EASY filter) run in pure Python (the same output, slower)", file=sys.stderr)


def compile_extension(root: Path, into: Path) -> Path | None:
    """The built extension module in directory `into`, or None (with a warning) if it cannot
    be built here."""
    target = into / f"_speedups{sysconfig.get_config_var('EXT_SUFFIX')}"
    compiler = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    command = [*compiler, "-O2", "-fPIC", "-shared", "-fvisibility=hidden",
               f"-I{sysconfig.get_paths()['include']}", str(root / SOURCE), "-o", str(target),
               "-lm"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as exc:
        _warn(f"no C compiler to build {SOURCE} ({compiler[0]}: {exc.strerror or exc})")
        return None
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["no message"])[0]
        _warn(f"{SOURCE} did not compile ({' '.join(compiler)}: {first})")
        return None
    return target


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        root = Path(self.root)
        if os.environ.get("COBALTLITE_PURE_BUILD"):
            _warn("COBALTLITE_PURE_BUILD is set")
            return
        if version == "editable":
            # The package is imported from the source tree: the module goes next to its source.
            compile_extension(root, root / "cobaltlite")
            return
        self._scratch = tempfile.TemporaryDirectory()
        built = compile_extension(root, Path(self._scratch.name))
        if built is None:
            return
        build_data["force_include"][str(built)] = f"cobaltlite/{built.name}"
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        scratch = getattr(self, "_scratch", None)
        if scratch is not None:
            scratch.cleanup()
