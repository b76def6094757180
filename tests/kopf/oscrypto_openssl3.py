"""A pytest plugin for kopf's e2e run (`-p oscrypto_openssl3`): oscrypto reads OpenSSL 3.0.10+.

kopf's WebhookServer makes its self-signed certificate with certbuilder and oscrypto (kopf's
own dev extra), and kopf's example 17-admission asks for one. oscrypto 1.3.0, its latest
release, finds libcrypto's version with the pattern `\\d\\.\\d\\.\\d`, which matches no
OpenSSL from 3.0.10 on ("OpenSSL 3.0.19 ..."), and refuses to load ("Error detecting the
version of libcrypto"). oscrypto's main branch reads `\\d+\\.\\d+\\.\\d+` instead, unreleased.
This plugin applies that one change to the two modules that carry the pattern, as they are
imported; if a later oscrypto no longer has it, nothing changes. Nothing of kopf changes.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import CodeType, ModuleType

PATTERN = rb"'\\b(\\d\\.\\d\\.\\d[a-z]*)\\b'"
FIXED = rb"'\\b(\\d+\\.\\d+\\.\\d+[a-z]*)\\b'"
MODULES = {"oscrypto._openssl._libcrypto_ctypes", "oscrypto._openssl._libcrypto_cffi"}


class _FixedSource(importlib.machinery.SourceFileLoader):
    def get_code(self, fullname: str) -> CodeType:
        source = self.get_data(self.path).replace(PATTERN, FIXED)
        return compile(source, self.path, "exec", dont_inherit=True)


class _Finder:
    @staticmethod
    def find_spec(
        name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name not in MODULES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.origin is None:
            return spec
        return importlib.util.spec_from_file_location(
            name, spec.origin, loader=_FixedSource(name, spec.origin)
        )


sys.meta_path.insert(0, _Finder())  # type: ignore[arg-type]
