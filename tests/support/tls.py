"""Certificates for tests over TLS: a private CA, server and client certificates.

Made with Debian's ``openssl`` command in the test's own folder, so no
certificate is committed and none outlives its test. The server certificate
names ``localhost`` and ``127.0.0.1`` (what the test servers listen on), so
clients verify the hostname as production does. ``other_ca`` signs nothing a
server uses (a client that trusts it must be refused), and ``wrong_name`` is
a server certificate of the right CA for another host name (a hostname
mismatch must be refused).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

DAYS = "2"


@dataclass(frozen=True)
class Pki:
    folder: Path

    def path(self, name: str) -> Path:
        return self.folder / name

    @property
    def ca(self) -> Path:
        return self.path("ca.crt")

    @property
    def other_ca(self) -> Path:
        return self.path("other-ca.crt")

    @property
    def server_cert(self) -> Path:
        return self.path("server.crt")

    @property
    def server_key(self) -> Path:
        return self.path("server.key")

    @property
    def wrong_name_cert(self) -> Path:
        return self.path("wrong-name.crt")

    @property
    def wrong_name_key(self) -> Path:
        return self.path("wrong-name.key")

    @property
    def client_cert(self) -> Path:
        return self.path("client.crt")

    @property
    def client_key(self) -> Path:
        return self.path("client.key")

    def redis_server_options(self, port: int, *, clients: str = "no") -> list[str]:
        """redis-server options for TLS only on ``port`` (plain TCP off).

        ``clients``: ``--tls-auth-clients`` (no, optional or yes: mutual TLS).
        """
        return [
            "--port",
            "0",
            "--tls-port",
            str(port),
            "--tls-cert-file",
            str(self.server_cert),
            "--tls-key-file",
            str(self.server_key),
            "--tls-ca-cert-file",
            str(self.ca),
            "--tls-auth-clients",
            clients,
        ]

    def url(self, port: int, *, db: int = 0, ca: Path | None = None, client: bool = False) -> str:
        """A ``rediss://`` URL that verifies the server with ``ca`` (default: ours)."""
        query = f"ssl_ca_certs={ca or self.ca}"
        if client:
            query += f"&ssl_certfile={self.client_cert}&ssl_keyfile={self.client_key}"
        return f"rediss://localhost:{port}/{db}?{query}"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _ca(name: str, folder: Path) -> None:
    _openssl("genrsa", "-out", f"{name}.key", "2048", cwd=folder)
    _openssl(
        "req", "-x509", "-new", "-key", f"{name}.key", "-days", DAYS,
        "-subj", f"/CN={name} test CA", "-out", f"{name}.crt",
        cwd=folder,
    )  # fmt: skip


def _signed(name: str, ca: str, subject: str, san: str, folder: Path, usage: str) -> None:
    _openssl("genrsa", "-out", f"{name}.key", "2048", cwd=folder)
    _openssl("req", "-new", "-key", f"{name}.key", "-subj", subject, "-out", f"{name}.csr",
             cwd=folder)  # fmt: skip
    extensions = folder / f"{name}.ext"
    lines = [f"extendedKeyUsage={usage}"]
    if san:
        lines.append(f"subjectAltName={san}")
    extensions.write_text("\n".join(lines) + "\n")
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
        "-CAcreateserial", "-days", DAYS, "-extfile", extensions.name, "-out", f"{name}.crt",
        cwd=folder,
    )  # fmt: skip


def make_pki(folder: Path) -> Pki:
    """Write a CA, another CA, server, wrong-name server and client certificates."""
    folder.mkdir(parents=True, exist_ok=True)
    _ca("ca", folder)
    _ca("other-ca", folder)
    _signed("server", "ca", "/CN=localhost", "DNS:localhost,IP:127.0.0.1", folder, "serverAuth")
    _signed("wrong-name", "ca", "/CN=wrong.example", "DNS:wrong.example", folder, "serverAuth")
    _signed("client", "ca", "/CN=crawler-client", "", folder, "clientAuth")
    for key in folder.glob("*.key"):
        key.chmod(0o600)
    return Pki(folder)
