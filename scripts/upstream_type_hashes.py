"""Print the RIHS01 type hashes of upstream interface definitions, computed by Jazzy's own rosidl.

    python scripts/upstream_type_hashes.py DEFINITIONS_ROOT

DEFINITIONS_ROOT holds ``<package>/{msg,action}/*`` exactly as the upstream repository has them at the release
in question (e.g. ``git show <commit>:nav2_msgs/action/NavigateToPose.action``). The files are converted to IDL
with rosidl_adapter and hashed with rosidl_generator_type_description, the steps ``rosidl_generate_interfaces``
runs, against the dependency descriptions of the ROS 2 in use (its ``share/<package>/{msg,srv,action}/*.json``,
found through AMENT_PREFIX_PATH; run after ``source scripts/ros_env.sh``). Prints one JSON object
``{type name: hash}`` on stdout; the expected hashes in tests/ros/test_standard_interfaces.py come from here
(docs/robots.md, "The standard interfaces").
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path


def upstream_hashes(root: Path) -> dict[str, str]:
    from rosidl_adapter import convert_to_idl
    from rosidl_generator_type_description import generate_type_hash

    prefixes = [Path(p) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    packages = sorted(p.name for p in root.iterdir() if p.is_dir())
    hashes: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        generated = work / "json"
        # Each dependency package's descriptions; the packages hashed here come first, so that a package of
        # DEFINITIONS_ROOT that includes another one of them uses the upstream copy, not an installed one.
        includes = [f"{pkg}:{generated / pkg}" for pkg in packages]
        for prefix in prefixes:
            share = prefix / "share"
            if share.is_dir():
                includes += [f"{d.name}:{d}" for d in share.iterdir() if d.is_dir() and d.name not in packages]
        for package in packages:
            package_dir = root / package
            idl_dir = work / "idl" / package
            idl_tuples = []
            for path in sorted(package_dir.glob("*/*")):
                with contextlib.redirect_stdout(io.StringIO()):  # the adapter reports each file it writes
                    idl = convert_to_idl(package_dir, package, path.relative_to(package_dir), idl_dir)
                idl_tuples.append(f"{idl_dir}:{idl.relative_to(idl_dir)}")
            arguments = work / f"{package}.arguments.json"
            arguments.write_text(json.dumps({"package_name": package, "output_dir": str(generated / package),
                                             "idl_tuples": idl_tuples, "include_paths": includes}))
            generate_type_hash(str(arguments))
            for description in sorted((generated / package).glob("*/*.json")):
                for entry in json.loads(description.read_text())["type_hashes"]:
                    if entry["type_name"].startswith(f"{package}/"):
                        hashes[entry["type_name"]] = entry["hash_string"]
    return dict(sorted(hashes.items()))


def main() -> int:
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        print("usage: python scripts/upstream_type_hashes.py DEFINITIONS_ROOT", file=sys.stderr)
        return 2
    print(json.dumps(upstream_hashes(Path(sys.argv[1])), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
