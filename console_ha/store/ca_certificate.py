"""The household's own CA certificate for an https Home Assistant: checked, described, stored, removed.

Stored where `ca_bundle_path` looks when the settings file names no `ca_bundle` of its own
(`D/secrets/home-assistant/ca-bundle.pem`), so the connection test, the picker and the capabilities all
trust it alike. Parsing is the `cryptography` library's (never a hand-written PEM or DER reader): every
PEM block and base64 run in a paste is parsed (`pem_paste`), a private key anywhere refuses the whole paste,
and only the parsed certificates are stored, re-encoded.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from console_ha.errors import InvalidSettingsChange, SettingsFileDamaged
from console_ha.language import Words
from console_ha.store import pem_paste
from console_ha.store.atomic import atomic_write, path_lock
from console_ha.store.config import ConfigStore, HomeAssistantConfig
from console_ha.store.datadir import DataDir, InstanceFiles, ensure_secrets_dir
from console_ha.store.pem_paste import Found
from console_ha.timestamps import utc_z

log = logging.getLogger(__name__)

FIELD = "ca_certificate"
# A CA and a chain of a few intermediates fit many times over; anything larger is not what we ask for.
MAX_PEM_BYTES = 64 * 1024
MAX_CERTIFICATES = 8
# A NUL or another control character is in no certificate file: a binary or damaged file, or text made to
# read differently in different tools. Refused with words rather than dropped, so the household knows.
_CONTROL_CHARACTER = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")

# The PEM markers and file names are the same in every language: values, not words to translate.
_BEGIN, _END = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"
NOT_PEM = Words("This is not a PEM certificate. It should start with “{begin}”; in Home Assistant’s set-up it is "
                "often a file named {file} or {other_file}.", begin=_BEGIN, file="ca.crt", other_file="ca.pem")
A_PRIVATE_KEY = Words("This holds a private key, which must never be shared, so nothing was stored. Only the "
                      "certificate is needed: paste only the part from “{begin}” to “{end}”.", begin=_BEGIN, end=_END)
DAMAGED = Words("This certificate is damaged or incomplete: the text between “{begin}” and “{end}” cannot be read. "
                "Copy it again whole, or choose the certificate file.", begin=_BEGIN, end=_END)
A_CONTROL_CHARACTER = Words("This holds a character that no certificate file has (such as a NUL byte), so "
                            "nothing was stored. Choose the certificate file again, or paste only the part from "
                            "“{begin}” to “{end}”.", begin=_BEGIN, end=_END)
# What refuses a paste, most important first: a key is named even when the paste is damaged as well.
_REFUSED = ((Found.PRIVATE_KEY, A_PRIVATE_KEY), (Found.DAMAGED_CERTIFICATE, DAMAGED), (Found.OTHER, NOT_PEM))


@dataclass(frozen=True)
class CertificateInfo:
    """One certificate as the page shows it."""

    subject: str
    issuer: str
    not_before: str
    not_after: str
    kind: str  # "ca", "self_signed_host" or "host"
    hosts: tuple[str, ...]
    words: Words  # what it is, in the household's words

    def to_json(self) -> dict[str, object]:
        """The JSON the settings API answers with."""
        return {"subject": self.subject, "issuer": self.issuer, "not_before": self.not_before,
                "not_after": self.not_after, "kind": self.kind, "hosts": list(self.hosts), "words": self.words}


def _usable(pem: str, moment: datetime) -> list[x509.Certificate]:
    """The certificates in `pem`, parsed, once none is out of date and not all are hosts'; else refused."""
    certificates = _certificates(pem)
    for cert in certificates:
        _refuse_if_out_of_date(cert, moment)
    infos = [_info(cert) for cert in certificates]
    if all(info.kind == "host" for info in infos):
        first = infos[0]
        raise InvalidSettingsChange(Words(
            "This is the certificate of a host ({subject}), issued by {issuer}. The Console needs the certificate "
            "of whoever issued it (the CA), which trusts every certificate it signs.",
            subject=first.subject, issuer=first.issuer), field=FIELD)
    return certificates


def _certificates(pem: str) -> list[x509.Certificate]:
    """Every certificate in the paste, parsed; refused if it holds a key, damage, anything else, or too many."""
    if len(pem.encode("utf-8", "replace")) > MAX_PEM_BYTES:
        raise InvalidSettingsChange(Words("This file is larger than a CA certificate ({size} KiB at most).",
                                          size=MAX_PEM_BYTES // 1024), field=FIELD)
    if _CONTROL_CHARACTER.search(pem):
        raise InvalidSettingsChange(A_CONTROL_CHARACTER, field=FIELD)
    reading = pem_paste.read(pem)
    for found, words in _REFUSED:
        if found in reading.found:
            if found is Found.PRIVATE_KEY:
                log.warning("a CA certificate paste held a private key: refused, nothing stored")
            raise InvalidSettingsChange(words, field=FIELD)
    if not reading.certificates:
        raise InvalidSettingsChange(NOT_PEM, field=FIELD)
    if len(reading.certificates) > MAX_CERTIFICATES:
        raise InvalidSettingsChange(Words("At most {count} certificates at once, please.", count=MAX_CERTIFICATES),
                                    field=FIELD)
    return list(reading.certificates)


def _refuse_if_out_of_date(cert: x509.Certificate, moment: datetime) -> None:
    """Expired, or not valid yet: OpenSSL would refuse every connection, so the page refuses it first."""
    info = _info(cert)
    if cert.not_valid_after_utc <= moment:
        raise InvalidSettingsChange(Words("This certificate ({subject}) expired on {date}: Home Assistant needs a "
                                          "new one, and then so does this page.",
                                          subject=info.subject, date=cert.not_valid_after_utc.date()),
                                    field=FIELD)
    if cert.not_valid_before_utc > moment:
        # OpenSSL refuses it until then, so every https call would fail while the page showed it as fine;
        # a date just ahead is usually one of the two machines' clocks being wrong.
        when = cert.not_valid_before_utc.replace(second=0, microsecond=0)
        raise InvalidSettingsChange(Words("This certificate ({subject}) is not valid before {when} UTC. Check the "
                                          "date and time on this computer and on the one that made it.",
                                          subject=info.subject, when=when), field=FIELD)


def _info(cert: x509.Certificate) -> CertificateInfo:
    subject, issuer = cert.subject.rfc4514_string(), cert.issuer.rfc4514_string()
    try:
        is_ca = bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        is_ca = False
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        hosts = tuple([*names.get_values_for_type(x509.DNSName),
                       *(str(ip) for ip in names.get_values_for_type(x509.IPAddress))])
    except x509.ExtensionNotFound:
        hosts = ()
    self_signed = cert.subject == cert.issuer
    # A self-signed certificate naming hosts is that host's own (openssl's quick recipe marks it CA:TRUE
    # too): it vouches for those names only. A CA without host names vouches for whatever it signs.
    if self_signed and (hosts or not is_ca):
        kind = "self_signed_host"
        named = ", ".join(hosts) or subject
        words = Words("A self-signed certificate for one Home Assistant ({named}). The Console will trust that "
                      "address only, and only until the certificate is replaced.", named=named)
    elif is_ca:
        kind = "ca"
        words = Words("A certificate authority (CA): {subject}. The Console will trust every Home Assistant "
                      "certificate it has signed.", subject=subject)
    else:
        kind = "host"
        words = Words("The certificate of a host, issued by {issuer}; not a CA.", issuer=issuer)
    return CertificateInfo(subject, issuer, utc_z(cert.not_valid_before_utc),
                           utc_z(cert.not_valid_after_utc), kind, hosts, words)


class CACertificateStore:
    """The stored CA certificate (`D/secrets/home-assistant/ca-bundle.pem`): read, replace, remove."""

    def __init__(self, data_dir: DataDir, config_store: ConfigStore, *,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._files = data_dir.instance(config_store.instance)  # the instance whose settings file it reads
        self._config = config_store  # the settings file, which may name a CA bundle of its own
        self._clock = clock  # what "now" is for a certificate's dates (a test moves it)

    def managed_by_file(self) -> str | None:
        """The settings file's own `ca_bundle` path when it names one (then this store is not used)."""
        try:
            return self._config.load().ca_bundle or None
        except SettingsFileDamaged:
            return None

    def _refuse_if_managed_by_file(self) -> None:
        path = self.managed_by_file()
        if path:
            raise InvalidSettingsChange(Words(
                "The settings file names its own CA bundle ({path}), so the Console uses that one. Edit or remove "
                "{setting} in {config} to manage the certificate on this page.",
                path=path, config=str(self._files.config), setting="`ca_bundle`"), field=FIELD)

    def current(self) -> tuple[str | None, list[CertificateInfo]]:
        """The PEM the Console uses (the file's own path first), described; (None, []) when there is none."""
        path = self.managed_by_file() or str(self._files.ca_bundle)
        try:
            with open(path, "rb") as handle:
                raw = handle.read(MAX_PEM_BYTES + 1)
        except FileNotFoundError:
            return None, []
        except OSError as err:
            log.warning("the CA certificate file cannot be read (%s)", err.strerror)
            return path, []
        try:
            certificates = x509.load_pem_x509_certificates(raw)
        except ValueError:
            return path, []  # damaged: the page says it cannot be read, and offers to replace it
        return path, [_info(cert) for cert in certificates]

    def store(self, pem: str) -> list[CertificateInfo]:
        """Check `pem` (400 INVALID_CONFIG on `ca_certificate` with why, if not usable), then replace the stored
        file with its certificates, re-encoded, atomically."""
        self._refuse_if_managed_by_file()
        certificates = _usable(pem, self._clock())
        infos = [_info(cert) for cert in certificates]
        ensure_secrets_dir(self._files)
        # Re-encoded from what was parsed, never the paste itself: nothing around the certificates is kept.
        text = b"".join(cert.public_bytes(Encoding.PEM) for cert in certificates)
        with path_lock(self._files.ca_bundle):
            atomic_write(self._files.ca_bundle, text, mode=0o600)
        log.info("stored a CA certificate for Home Assistant: %s", infos[0].subject)
        return infos

    def remove(self) -> None:
        """Forget the stored certificate; no error when there is none."""
        self._refuse_if_managed_by_file()
        with path_lock(self._files.ca_bundle):
            try:
                os.unlink(self._files.ca_bundle)
            except FileNotFoundError:
                pass


def ca_bundle_path(config: HomeAssistantConfig, files: InstanceFiles) -> str | None:
    """The household's own CA for https: the configured `ca_bundle`, else a stored `ca-bundle.pem`, else None.

    The one answer for every connection (settings page, picker, capabilities), so a setup the settings
    page shows as working is the setup the capabilities use.
    """
    if config.ca_bundle:
        return config.ca_bundle
    stored = files.ca_bundle
    return str(stored) if stored.is_file() else None
