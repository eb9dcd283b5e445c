"""The CA certificate's words in the household's language: what a paste is, and why one is refused."""

from __future__ import annotations

from pathlib import Path

from flask.testing import FlaskClient

from console_ha.store.ca_certificate import DAMAGED
from console_ha.store.datadir import DataDir
from tests.certs import make_ca

from .conftest import API

CA_API = f"{API}/ca-certificate"
FRENCH = {"Accept-Language": "fr-FR,fr;q=0.9"}
CHINESE = {"Accept-Language": "zh-CN"}
BROKEN = "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"


def test_a_damaged_paste_is_refused_in_french_and_chinese_with_the_pem_markers_kept(
        household: FlaskClient, data_dir: DataDir) -> None:
    french = household.post(CA_API, json={"pem": BROKEN}, headers=FRENCH).get_json()["error"]
    assert french["message"] == (
        "Ce certificat est endommagé ou incomplet\u00a0: le texte entre «\u00a0-----BEGIN CERTIFICATE-----\u00a0» et "
        "«\u00a0-----END CERTIFICATE-----\u00a0» est illisible. Copiez-le à nouveau en entier, ou choisissez le "
        "fichier du certificat.")
    chinese = household.post(CA_API, json={"pem": BROKEN}, headers=CHINESE).get_json()["error"]
    assert chinese["message"].startswith("此证书已损坏或不完整：“-----BEGIN CERTIFICATE-----”和")
    english = household.post(CA_API, json={"pem": BROKEN}).get_json()["error"]
    assert english["message"] == DAMAGED
    assert english["message"].startswith("This certificate is damaged or incomplete: the text between “-----BEGIN")
    assert not data_dir.ha_ca_bundle.exists()


def test_a_ca_is_described_in_chinese_and_too_many_certificates_in_french(
        household: FlaskClient, tmp_path: Path) -> None:
    issued = make_ca(tmp_path / "ca")
    (info,) = household.post(CA_API, json={"pem": issued.ca_pem}, headers=CHINESE).get_json()["certificates"]
    assert info["kind"] == "ca" and info["words"].startswith("证书颁发机构（CA）：")
    assert info["words"].endswith("控制台会信任它签署的每一个 Home Assistant 证书。")
    too_many = household.post(CA_API, json={"pem": issued.ca_pem * 9}, headers=FRENCH).get_json()["error"]
    assert too_many["message"] == "Pas plus de 8 certificats à la fois, s’il vous plaît."
