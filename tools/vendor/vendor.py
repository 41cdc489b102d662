"""Fetch the web UI's third-party assets from the npm registry at the versions package-lock.json pins, copy the files
the UI serves into src/lamarck/web_ui/vendor/ (licences into vendor/licenses/), and check them against the committed
SHA256SUMS. Run by `make vendor`; `--update` rewrites SHA256SUMS (and known-urls.txt, for review) after a deliberate
version change.

    python3 tools/vendor/vendor.py [--update]

npm runs with --ignore-scripts (swagger-ui-dist depends on a telemetry package whose install script must not run).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENDOR = HERE.parents[1] / "src" / "lamarck" / "web_ui" / "vendor"
SUMS = VENDOR / "SHA256SUMS"
# Every http(s) address written in a vendored script or stylesheet (XML namespaces, links in comments and error
# messages, Swagger UI's validator, which the UI turns off), reviewed: tests/web_ui fails on one not listed here.
KNOWN_URLS = HERE / "known-urls.txt"
URL = re.compile(r"https?://[^\s\"'`<>()\\]*")

# node_modules path -> path under web_ui/vendor/
FILES = {
    "swagger-ui-dist/swagger-ui-bundle.js": "swagger-ui/swagger-ui-bundle.js",
    "swagger-ui-dist/swagger-ui.css": "swagger-ui/swagger-ui.css",
    "swagger-ui-dist/LICENSE": "licenses/swagger-ui-dist.LICENSE.txt",
    "swagger-ui-dist/NOTICE": "licenses/swagger-ui-dist.NOTICE.txt",
    "uplot/dist/uPlot.esm.js": "uplot/uPlot.esm.js",
    "uplot/dist/uPlot.min.css": "uplot/uPlot.min.css",
    "uplot/LICENSE": "licenses/uplot.LICENSE.txt",
}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_sums() -> dict[str, str]:
    if not SUMS.exists():
        return {}
    sums: dict[str, str] = {}
    for line in SUMS.read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        sums[name.strip()] = digest
    return sums


def urls_in(path: Path) -> set[str]:
    return set(URL.findall(path.read_text(encoding="utf-8", errors="replace")))


def write_known_urls() -> None:
    lines = [
        f"{dest}\t{url}\n"
        for dest in sorted(FILES.values())
        if not dest.startswith("licenses/")
        for url in sorted(urls_in(VENDOR / dest))
    ]
    KNOWN_URLS.write_text("".join(lines))


def fetch(into: Path) -> Path:
    """node_modules installed exactly from the lock file, in a scratch directory."""
    for name in ("package.json", "package-lock.json"):
        shutil.copy(HERE / name, into / name)
    subprocess.run(
        ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], cwd=into, check=True
    )
    return into / "node_modules"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="rewrite SHA256SUMS from what npm delivered")
    args = parser.parse_args()
    expected = read_sums()
    with tempfile.TemporaryDirectory(prefix="lamarck-vendor-") as scratch:
        modules = fetch(Path(scratch))
        fetched = {dest: modules / source for source, dest in FILES.items()}
        got = {dest: sha256(path) for dest, path in fetched.items()}
        if not args.update:
            wrong = sorted(dest for dest in FILES.values() if expected.get(dest) != got[dest])
            if wrong:
                print(f"checksum mismatch (or not in {SUMS.name}): {', '.join(wrong)}", file=sys.stderr)
                print("if the versions in package.json changed on purpose, run with --update", file=sys.stderr)
                return 1
        for dest, path in fetched.items():
            target = VENDOR / dest
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    if args.update:
        SUMS.write_text("".join(f"{got[dest]}  {dest}\n" for dest in sorted(got)))
        write_known_urls()
    print(f"{len(FILES)} files in {VENDOR}, checksums as in {SUMS.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
