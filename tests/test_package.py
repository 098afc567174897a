"""The installed package lives under the ``reflexrag`` namespace only."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from tests.conftest import REPO


def test_the_wheel_installs_only_the_reflexrag_namespace(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        check=True,
        timeout=600,
    )
    [wheel] = tmp_path.glob("reflexrag-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    [metadata] = tops - {"reflexrag"}
    assert metadata.startswith("reflexrag-") and metadata.endswith(".dist-info"), tops
    assert "reflexrag/providers/sample_kb/self-rag.md" in names
    assert "reflexrag/server/static/index.html" in names


def test_a_project_with_its_own_state_and_providers_can_import_reflexrag(tmp_path):
    (tmp_path / "state.py").write_text("MINE = True\n")
    (tmp_path / "providers").mkdir()
    (tmp_path / "providers" / "__init__.py").write_text("MINE = True\n")
    probe = (
        "import state, providers; assert state.MINE and providers.MINE\n"
        "from reflexrag.state import Context\n"
        "from reflexrag.graphs import compile_strategy\n"
        "print(Context().top_k, compile_strategy('naive').name)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["4", "naive"]
