"""The CA check parses the paste: a private key in any form refuses it, and only certificates are stored."""

from __future__ import annotations

import base64
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.serialization import Encoding, PrivateFormat

from console_ha.errors import InvalidConfig
from console_ha.store.ca_certificate import CACertificateStore
from console_ha.store.config import ConfigStore
from console_ha.store.datadir import DataDir
from tests.certs import make_ca


@dataclass(frozen=True)
class Material:
    """Two household CAs' PEMs, and an RSA and an EC private key."""

    ca: str
    other_ca: str
    rsa_key: rsa.RSAPrivateKey
    ec_key: ec.EllipticCurvePrivateKey


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> Material:
    directory = tmp_path_factory.mktemp("ca")
    return Material(make_ca(directory / "one").ca_pem, make_ca(directory / "two").ca_pem,
                    rsa.generate_private_key(public_exponent=65537, key_size=2048),
                    ec.generate_private_key(ec.SECP256R1()))


def _pem(key: PrivateKeyTypes, fmt: PrivateFormat = PrivateFormat.PKCS8, password: bytes | None = None) -> str:
    encryption = (serialization.BestAvailableEncryption(password) if password
                  else serialization.NoEncryption())
    return key.private_bytes(Encoding.PEM, fmt, encryption).decode("ascii")


def _der_base64(key: PrivateKeyTypes, fmt: PrivateFormat, password: bytes | None = None) -> str:
    """The key's DER in base64 lines, with no PEM header at all."""
    encryption = (serialization.BestAvailableEncryption(password) if password
                  else serialization.NoEncryption())
    der = key.private_bytes(Encoding.DER, fmt, encryption)
    return "\n".join(textwrap.wrap(base64.b64encode(der).decode("ascii"), 64)) + "\n"


def _relabel(pem: str, label: str) -> str:
    """The same body under another BEGIN/END label (headers such as Proc-Type kept)."""
    lines = pem.strip().split("\n")
    return "\n".join([f"-----BEGIN {label}-----", *lines[1:-1], f"-----END {label}-----"]) + "\n"


def _body(pem: str) -> str:
    return "\n".join(pem.strip().split("\n")[1:-1]) + "\n"


# Each: what is pasted besides the household's CA. Every one was stored verbatim, or refused as "not a PEM
# certificate" rather than as a key, before the check parsed the paste.
KEY_PASTES: dict[str, Callable[[Material], str]] = {
    "lower-case-header": lambda m: _relabel(_pem(m.ec_key), "private key").replace("BEGIN", "begin")
    .replace("END", "end"),
    "private-dash-key-header": lambda m: _relabel(_pem(m.ec_key), "PRIVATE-KEY"),
    "mixed-case-key-between-two-certificates": lambda m: _relabel(_pem(m.ec_key), "Private Key") + m.other_ca,
    "headerless-pkcs8-base64": lambda m: _body(_pem(m.ec_key)),
    "rsa-pkcs1-der-in-base64": lambda m: _der_base64(m.rsa_key, PrivateFormat.TraditionalOpenSSL),
    "ec-sec1-der-in-base64": lambda m: _der_base64(m.ec_key, PrivateFormat.TraditionalOpenSSL),
    "encrypted-pkcs8-der-in-base64": lambda m: _der_base64(m.ec_key, PrivateFormat.PKCS8, b"secret"),
    "encrypted-pkcs8-labelled-certificate": lambda m: _relabel(_pem(m.rsa_key, password=b"secret"),
                                                               "CERTIFICATE"),
    "openssl-legacy-encrypted-labelled-certificate": lambda m: _relabel(
        _pem(m.ec_key, PrivateFormat.TraditionalOpenSSL, b"secret"), "CERTIFICATE"),
    "openssh-headerless": lambda m: _body(_pem(m.ec_key, PrivateFormat.OpenSSH)),
    "rsa-key-under-four-dashes": lambda m: _pem(m.rsa_key, PrivateFormat.TraditionalOpenSSL)
    .replace("-----", "----"),
}


@pytest.fixture
def store(data_dir: DataDir) -> CACertificateStore:
    return CACertificateStore(data_dir, ConfigStore(data_dir))


@pytest.mark.parametrize("paste", list(KEY_PASTES.values()), ids=list(KEY_PASTES))
def test_a_private_key_in_any_form_refuses_the_paste_and_nothing_is_written(
    store: CACertificateStore, data_dir: DataDir, material: Material, hidden_secrets: list[str],
    paste: Callable[[Material], str]
) -> None:
    """Found by parsing, not by its header: said to be a key, never stored, never echoed or logged."""
    key_text = paste(material)
    hidden_secrets.extend(line for line in key_text.split("\n") if len(line) >= 40)
    with pytest.raises(InvalidConfig, match="private key, which must never be shared") as refused:
        store.store(material.ca + key_text)
    assert refused.value.detail["field"] == "ca_certificate" and "nothing was stored" in str(refused.value)
    assert all(secret not in str(refused.value) for secret in hidden_secrets)
    assert not data_dir.ha_ca_bundle.exists()


def test_a_key_refused_leaves_the_stored_certificate_as_it_was(store: CACertificateStore, data_dir: DataDir,
                                                               material: Material) -> None:
    store.store(material.ca)
    before = data_dir.ha_ca_bundle.read_bytes()
    with pytest.raises(InvalidConfig, match="private key"):
        store.store(material.other_ca + _body(_pem(material.rsa_key)))
    assert data_dir.ha_ca_bundle.read_bytes() == before


def test_a_trailing_nul_byte_is_refused_and_nothing_is_written(store: CACertificateStore, data_dir: DataDir,
                                                               material: Material) -> None:
    """No certificate file holds a NUL: refused with words, rather than silently dropped or stored."""
    with pytest.raises(InvalidConfig, match="such as a NUL byte") as refused:
        store.store(material.ca + "\x00")
    assert refused.value.detail["field"] == "ca_certificate" and "nothing was stored" in str(refused.value)
    assert not data_dir.ha_ca_bundle.exists()


def test_only_the_certificates_are_stored_re_encoded_without_the_text_around_them(
    store: CACertificateStore, data_dir: DataDir, material: Material
) -> None:
    """OpenSSL's subject= lines, comments, a byte-order mark, CRLF and a last word: none reaches the file."""
    paste = ("\ufeffsubject=CN = Test household CA, O = Zoë’s house\r\n"
             "issuer=CN = Test household CA\r\n"
             + material.ca.replace("\n", "\r\n")
             + "# the second one\nBag Attributes\n    friendlyName: other\n"
             + material.other_ca + "\n\nend of bundle\n")
    infos = store.store(paste)
    assert [info.kind for info in infos] == ["ca", "ca"]
    assert data_dir.ha_ca_bundle.read_text(encoding="ascii") == material.ca + material.other_ca


def test_a_certificate_pasted_without_its_header_is_stored_re_encoded(
    store: CACertificateStore, data_dir: DataDir, material: Material
) -> None:
    """Its base64 parses as a certificate, so it is one: stored with the header it lacked."""
    store.store("here it is:\n" + _body(material.ca))
    assert data_dir.ha_ca_bundle.read_text(encoding="ascii") == material.ca


def _drop_line(pem: str, index: int) -> str:
    lines = pem.split("\n")
    return "\n".join(lines[:index] + lines[index + 1:])


DAMAGED = {
    "a-body-line-missing": lambda pem: _drop_line(pem, 3),
    "last-lines-missing": lambda pem: "\n".join(pem.split("\n")[:-3]) + "\n",
    "not-base64": lambda pem: "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n",
    "cut-short": lambda pem: pem[: len(pem) // 2],
}


@pytest.mark.parametrize("damage", list(DAMAGED.values()), ids=list(DAMAGED))
def test_a_damaged_certificate_is_said_to_be_damaged_not_to_lack_its_first_line(
    store: CACertificateStore, data_dir: DataDir, material: Material, damage: Callable[[str], str]
) -> None:
    """It does start with -----BEGIN CERTIFICATE-----, so the words say it is damaged or incomplete."""
    with pytest.raises(InvalidConfig, match="damaged or incomplete") as refused:
        store.store(damage(material.ca))
    assert "It should start with" not in str(refused.value)
    assert not data_dir.ha_ca_bundle.exists()


def test_a_public_key_beside_the_certificate_is_refused_as_not_a_certificate(
    store: CACertificateStore, material: Material
) -> None:
    """Only certificates are asked for: anything else in a PEM block refuses the paste, as before."""
    public = material.ec_key.public_key().public_bytes(Encoding.PEM,
                                                        serialization.PublicFormat.SubjectPublicKeyInfo)
    with pytest.raises(InvalidConfig, match="not a PEM certificate"):
        store.store(material.ca + public.decode("ascii"))


def test_a_whole_certificate_whose_end_line_was_lost_is_stored_re_encoded(
    store: CACertificateStore, data_dir: DataDir, material: Material
) -> None:
    """Its body is all there (DER carries its own length): read to the end of the paste, stored whole."""
    store.store(material.ca.replace("-----END CERTIFICATE-----\n", ""))
    assert data_dir.ha_ca_bundle.read_text(encoding="ascii") == material.ca
