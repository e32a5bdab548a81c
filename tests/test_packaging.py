"""viz_core installs as a package (pyproject.toml): a script outside the repository imports it, with its locales and
shipped checkpoints."""
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_holds_viz_core_and_its_data_and_works_outside_the_repository(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(ROOT),
                    "-w", str(tmp_path / "wheel")], check=True, cwd=tmp_path, timeout=300)
    [wheel] = (tmp_path / "wheel").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "viz_core/locales/attention.json" in names and "viz_core/checkpoints/reverse/model.safetensors" in names
    assert not any(n.startswith(("app_pages/", "tests/", "bench/")) for n in names)
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(tmp_path / "site"),
                    str(wheel)], check=True, timeout=300)
    script = ("from viz_core import CHECKPOINTS_DIR, i18n\n"
              "from viz_core.seq2seq.training import load_checkpoint\n"
              "assert i18n.t('common.nav_attention', 'zh') == '注意力'\n"
              "print(load_checkpoint(CHECKPOINTS_DIR / 'reverse').translate('3 1 4 1 5'))\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "5 1 4 1 3"
