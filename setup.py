"""Map the repo's top-level folders to grpo_debug.<name>, every sub-folder included.

pyproject-only setuptools silently drops unlisted subpackages from the wheel; this lists them all, so a
new subpackage (a folder with an __init__.py) is found without editing this file.
"""
from setuptools import find_namespace_packages, setup

TOP = ("server", "tools", "probes", "skills")
package_dir = {f"grpo_debug.{t}": t for t in TOP}
packages = []
for t in TOP:
    packages.append(f"grpo_debug.{t}")
    packages += [f"grpo_debug.{t}.{p}" for p in find_namespace_packages(where=t, exclude=["*__pycache__*"])]
setup(package_dir=package_dir, packages=packages)
