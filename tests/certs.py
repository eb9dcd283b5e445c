"""Certificates made for a test: a household CA, a server certificate it signs, a self-signed host one."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from console_ha.store.ca_certificate import CACertificateStore, CertificateInfo
from console_ha.store.config import ConfigStore
from console_ha.store.datadir import DataDir


@dataclass(frozen=True)
class Issued:
    """A CA's PEM, and a server certificate and key for 127.0.0.1 it signed, as files for a TLS server."""

    ca_pem: str
    server_cert: str
    server_key: str


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Test household")])


def _pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode("ascii")


def make_ca(directory: Path, *, days: int = 30, not_after: datetime | None = None) -> Issued:
    """A CA (no host names) and a server certificate for 127.0.0.1 and localhost it signed."""
    now = datetime.now(UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("Test household CA")
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - timedelta(days=1)).not_valid_after(not_after or now + timedelta(days=days))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    server = (x509.CertificateBuilder().subject_name(_name("127.0.0.1")).issuer_name(ca_name)
              .public_key(key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(now - timedelta(days=1)).not_valid_after(now + timedelta(days=days))
              .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                          x509.DNSName("localhost")]), critical=False)
              .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
              .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
              .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                             critical=False)
              .sign(ca_key, hashes.SHA256()))
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / "server.pem", directory / "server.key"
    cert_path.write_text(_pem(server))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return Issued(_pem(ca), str(cert_path), str(key_path))


def store_at(data_dir: DataDir, pem: str, days_from_now: int = 0) -> list[CertificateInfo]:
    """Store `pem` as the CA page does, the store's clock moved by `days_from_now`: its check, at that moment."""
    moment = datetime.now(UTC) + timedelta(days=days_from_now)
    return CACertificateStore(data_dir, ConfigStore(data_dir), clock=lambda: moment).store(pem)
