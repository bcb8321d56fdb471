"""A throwaway CA and a server certificate signed by it, for HTTPS tests (cryptography is imported lazily)."""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple


@dataclass(frozen=True)
class TLSFiles:
    ca_cert: Path  # PEM of the throwaway CA: what a client must trust
    cert: Path  # PEM of the server certificate (127.0.0.1 and localhost), signed by the CA
    key: Path  # PEM of the server's private key (unencrypted)


class _Issuer(NamedTuple):
    key: Any  # the CA's EC private key
    name: Any  # its x509.Name
    ski: Any  # its x509.SubjectKeyIdentifier


def make_tls_files(folder: Path, hosts: Sequence[str] = ("127.0.0.1", "localhost")) -> TLSFiles:
    """Write a throwaway CA and a server certificate for ``hosts`` (IPs become IP SANs) signed by it."""
    from cryptography.hazmat.primitives.asymmetric import ec

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc)
    start, end = now - dt.timedelta(days=1), now + dt.timedelta(days=30)

    issuer = _new_issuer()
    ca_cert = _ca_certificate(issuer, start, end)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _server_certificate(issuer, key, hosts, start, end)

    files = TLSFiles(folder / "ca.pem", folder / "server.pem", folder / "server.key")
    _write_pems(files, ca_cert, cert, key)
    return files


def _new_issuer() -> _Issuer:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "shardstream test CA")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    return _Issuer(ca_key, ca_name, ca_ski)


def _key_usage(ca: bool) -> Any:
    """Digital signatures always; certificate and CRL signing for the CA only."""
    from cryptography import x509

    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _ca_certificate(issuer: _Issuer, start: dt.datetime, end: dt.datetime) -> Any:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    return (
        x509.CertificateBuilder()
        .subject_name(issuer.name)
        .issuer_name(issuer.name)
        .public_key(issuer.key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(issuer.ski, critical=False)
        .sign(issuer.key, hashes.SHA256())
    )


def _server_certificate(
    issuer: _Issuer, key: Any, hosts: Sequence[str], start: dt.datetime, end: dt.datetime
) -> Any:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    authority = x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(issuer.ski)
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(issuer.name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(authority, critical=False)
        .sign(issuer.key, hashes.SHA256())
    )


def _write_pems(files: TLSFiles, ca_cert: Any, cert: Any, key: Any) -> None:
    from cryptography.hazmat.primitives import serialization

    files.ca_cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    files.key.chmod(0o600)
