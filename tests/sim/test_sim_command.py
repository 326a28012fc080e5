"""``berth sim`` as the README shows it, where the optional HTTP client is not installed."""

from __future__ import annotations

import subprocess
import sys


def test_without_pycurl_the_sim_names_the_extra_to_install_in_one_line(tmp_path):
    code = (
        "import sys; sys.modules['pycurl'] = None\n"
        "from berth.cli.main import main\n"
        "sys.exit(main(['sim', '--hosts', '200', '--ops', '3000', '--concurrency', '16', '--faults', '0.05',"
        " '--seed', '1']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.strip().splitlines() == [
        "error: berth sim needs pycurl, from Berth's optional dependencies 'bench': "
        "pip install 'berth[bench]' (or -e '.[bench]' in a source checkout)"
    ]
    assert list(tmp_path.iterdir()) == []
