"""The simulated API server's TLS: a throw-away CA and a server certificate for loopback.

kubectl and client-go never send a bearer token over plain ``http://``, so the
simulated API server speaks HTTPS like a real one. Each SimServer generates its
own self-signed CA (ECDSA P-256, valid from a day before the wall clock for a
year: certificates follow the wall clock, never the world's) and a server certificate for
``127.0.0.1``, ``::1``, ``localhost`` and the host it binds; the CA goes into the
printed kubeconfig as ``certificate-authority-data``.
"""

from __future__ import annotations

import base64
import ipaddress
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = timedelta(days=365)


@dataclass(frozen=True)
class ServerTLS:
    ca_path: str  # PEM of the CA (what a client trusts)
    cert_path: str  # PEM of the server certificate
    key_path: str  # PEM of the server key (PKCS#8, unencrypted; 0600)
    ca_pem: bytes

    @property
    def ca_data(self) -> str:
        """The CA as kubeconfig's ``certificate-authority-data`` (base64 of the PEM)."""
        return base64.b64encode(self.ca_pem).decode()

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.cert_path, self.key_path)
        ctx.set_alpn_protocols(["http/1.1"])  # no h2: client-go then speaks HTTP/1.1
        return ctx

    def client_context(self) -> ssl.SSLContext:
        """What a client trusting only this CA uses (tests, proxies)."""
        return ssl.create_default_context(cafile=self.ca_path)


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "rcaweb simulator"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


# length: the CA and the server certificate built in one sequence, each step using the last
def generate(directory: str | Path, host: str = "127.0.0.1", cluster: str = "sim") -> ServerTLS:
    """Write ca.crt, apiserver.crt and apiserver.key under ``directory``; returns their paths."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC)
    not_before = now - timedelta(days=1)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(f"{cluster}-ca")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.DNSName("kubernetes"),
        x509.DNSName("kubernetes.default.svc"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
    ]
    try:
        extra: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        extra = x509.DNSName(host)
    if extra not in names:
        names.append(extra)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("kube-apiserver"))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    ca_path, cert_path, key_path = out / "ca.crt", out / "apiserver.crt", out / "apiserver.key"
    ca_path.write_bytes(ca_pem)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + ca_pem)
    key_path.touch(mode=0o600)
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return ServerTLS(str(ca_path), str(cert_path), str(key_path), ca_pem)
