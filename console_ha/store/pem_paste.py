"""What a pasted PEM holds, found by parsing: the certificates to keep, and what to refuse.

Every PEM block (any label, in any case, ended or not) and every run of base64 lines outside a block is
decoded and handed to `cryptography`. A label only chooses the household's words for what does not parse
(a damaged certificate, a key too damaged to load); it never decides what a block is. Text outside the
blocks that is not base64 (OpenSSL's `subject=` lines, comments, a byte-order mark) is ignored: only the
parsed certificates are kept, so nothing pasted is stored as it was pasted.
"""

from __future__ import annotations

import base64
import binascii
import re
import textwrap
from dataclasses import dataclass
from enum import Enum

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

# RFC 7468's five dashes, any label (the label is read up to the closing dashes, "PRIVATE-KEY" included).
_MARKER = re.compile(r"-----[ \t]*(BEGIN|END)\b([^\n]*?)-----", re.IGNORECASE)
_BASE64_LINE = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_CERTIFICATE_LABELS = frozenset({"CERTIFICATE", "X509CERTIFICATE"})


class Found(Enum):
    """What one PEM block or base64 run turned out to be."""

    CERTIFICATE = "certificate"
    PRIVATE_KEY = "private_key"
    DAMAGED_CERTIFICATE = "damaged_certificate"  # labelled a certificate, but its body does not parse
    OTHER = "other"  # a PEM block that is neither (a public key, a request, a CRL, an unreadable body)


@dataclass(frozen=True)
class Reading:
    """The certificates parsed from a paste, in order, and every kind of thing found in it."""

    certificates: tuple[x509.Certificate, ...]
    found: frozenset[Found]


@dataclass(frozen=True)
class _Block:
    label: str  # upper case, letters and digits only: "PRIVATE-KEY" and "private key" both "PRIVATEKEY"
    body: str


def read(text: str) -> Reading:
    """Parse every PEM block and every base64 run outside one in `text`; see `Found`."""
    blocks, outside = _split(text.replace("\r\n", "\n").replace("\r", "\n"))
    certificates: list[x509.Certificate] = []
    found: set[Found] = set()
    for kind, cert in [*(_block(block) for block in blocks), *(_run(run) for run in _runs(outside))]:
        if kind is not None:
            found.add(kind)
        if cert is not None:
            certificates.append(cert)
    return Reading(tuple(certificates), frozenset(found))


def _split(text: str) -> tuple[list[_Block], list[str]]:
    """The PEM blocks (a BEGIN to its END, the next BEGIN or the end of the text), and the text between them."""
    blocks: list[_Block] = []
    outside: list[str] = []
    label: str | None = None  # the open block's, once a BEGIN is seen
    start = 0
    for marker in _MARKER.finditer(text):
        if label is not None:
            blocks.append(_Block(label, text[start:marker.start()]))
        else:
            outside.append(text[start:marker.start()])  # a stray END's own line is skipped with it
        is_begin = marker.group(1).upper() == "BEGIN"
        label = re.sub(r"[^A-Z0-9]", "", marker.group(2).upper()) if is_begin else None
        start = marker.end()
    if label is not None:
        blocks.append(_Block(label, text[start:]))  # no END: an incomplete block is still parsed
    else:
        outside.append(text[start:])
    return blocks, outside


def _block(block: _Block) -> tuple[Found, x509.Certificate | None]:
    """Parse one block's body; its label names only what cannot be parsed."""
    lines = block.body.split("\n")
    # RFC 1421 headers ("Proc-Type: 4,ENCRYPTED") hold a colon, which base64 never does.
    headers = [line.strip() for line in lines if ":" in line]
    data = "".join("".join(line.split()) for line in lines if ":" not in line)
    der = _decode(data)
    if der is not None:
        cert = _certificate(der)
        if cert is not None:
            return Found.CERTIFICATE, cert
        if _is_private_key(der):
            return Found.PRIVATE_KEY, None
    if (headers and _is_encrypted_pem_key(headers, data)) or "PRIVATEKEY" in block.label:
        return Found.PRIVATE_KEY, None
    if block.label in _CERTIFICATE_LABELS:
        return Found.DAMAGED_CERTIFICATE, None
    return Found.OTHER, None


def _runs(outside: list[str]) -> list[str]:
    """The runs of consecutive base64-only lines in the text outside blocks (a key pasted without its header)."""
    runs: list[str] = []
    for span in outside:
        run: list[str] = []
        for line in [*span.split("\n"), ""]:  # the empty line ends the span's last run
            if _BASE64_LINE.fullmatch(line.strip()):
                run.append(line.strip())
            elif run:
                runs.append("".join(run))
                run = []
    return runs


def _run(run: str) -> tuple[Found | None, x509.Certificate | None]:
    """A base64 run outside blocks counts only if it parses: a certificate, or a key; other text is ignored."""
    der = _decode(run)
    if der is None:
        return None, None
    cert = _certificate(der)
    if cert is not None:
        return Found.CERTIFICATE, cert
    return (Found.PRIVATE_KEY, None) if _is_private_key(der) else (None, None)


def _decode(data: str) -> bytes | None:
    try:
        return base64.b64decode(data, validate=True) or None
    except (binascii.Error, ValueError):  # ValueError: a character outside ASCII
        return None


def _certificate(der: bytes) -> x509.Certificate | None:
    try:
        return x509.load_der_x509_certificate(der)
    except ValueError:
        return None


def _is_private_key(der: bytes) -> bool:
    """Whether `cryptography` takes `der` for a private key: PKCS#1, PKCS#8 (encrypted too), SEC1 or OpenSSH."""
    try:
        # Only recognised, never used: the RSA consistency check would cost time for nothing.
        serialization.load_der_private_key(der, None, unsafe_skip_rsa_key_validation=True)
    except (TypeError, UnsupportedAlgorithm):
        return True  # TypeError: encrypted, it asks for the password; or a key of a type it does not support
    except ValueError:
        return _is_openssh_key(der)
    return True


def _is_openssh_key(der: bytes) -> bool:
    """OpenSSH's own key format; `cryptography` reads it only inside its own armour, so it is put back on."""
    armoured = (b"-----BEGIN OPENSSH PRIVATE KEY-----\n" + base64.encodebytes(der)
                + b"-----END OPENSSH PRIVATE KEY-----\n")
    try:
        serialization.load_ssh_private_key(armoured, None, unsafe_skip_rsa_key_validation=True)
    except (TypeError, UnsupportedAlgorithm):
        return True  # encrypted: it asks for the password (or for bcrypt, to derive the key from one)
    except ValueError:
        return False
    return True


def _is_encrypted_pem_key(headers: list[str], data: str) -> bool:
    """OpenSSL's older encrypted keys ("Proc-Type: 4,ENCRYPTED"): the body is ciphertext, only PEM names it."""
    pem = "\n".join(["-----BEGIN RSA PRIVATE KEY-----", *headers, "", *textwrap.wrap(data, 64),
                     "-----END RSA PRIVATE KEY-----", ""])
    try:
        serialization.load_pem_private_key(pem.encode("ascii", "replace"), None,
                                           unsafe_skip_rsa_key_validation=True)
    except (TypeError, UnsupportedAlgorithm):
        return True  # it asks for the password: whatever the key's type, the label it had does not matter
    except ValueError:
        return False
    return True
