#!/usr/bin/env python3
"""Cloudflare Access tokens minted by PyJWT, for paymos-core's access checks (interface §11).

    python3 make_access_vectors.py              # (re)write access.json next to this file
    python3 make_access_vectors.py --out PATH   # write them to PATH instead (tests/access_pyjwt.rs)

Needs PyJWT and cryptography (requirements-dev.txt; scripts/setup.sh installs them into the
repository's .venv). Every run makes new RSA keys, so the tokens differ from run to run; the
verdicts do not. The Rust test reads the committed access.json, and when this script can run
it mints a fresh set and checks that too.

Each vector is a token and the verdict expected at NOW: "ok" (with the actor) or the error code
of paymos_core::access. The verdict is not only written down here: each one is also decided by
PyJWT's own verifier (jwt.decode with the JWKS key of the token's kid, RS256 only, the audience,
the issuer, 60 s leeway, exp required; the key found by PyJWKSet) at a clock frozen at NOW,
and the script refuses to write a file where the two disagree, but for the rules that are this
receiver's own (listed in `ours`: the actor claims, a trailing slash on iss, a kid required).

The JWKS is served as Cloudflare serves {team domain}/cdn-cgi/access/certs: `keys` (JWK, with
kid/kty/alg/use/e/n), `public_cert` (the current key's certificate, PEM) and `public_certs`
(both keys' certificates).
"""
import argparse
import base64
import datetime as dt
import hashlib
import hmac as std_hmac
import json
import os
import sys

import jwt
from jwt.algorithms import HMACAlgorithm, RSAAlgorithm
from jwt.utils import force_bytes
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "access.json")

NOW = 1764450000
LEEWAY = 60
TEAM = "https://paymos-test.cloudflareaccess.com"
AUD = "4714c1358e65fe4b408ad6d432a5f878f08194bdb4752441fd56faefa9b2b6f2"
EMAIL = "operator@example.com"
SERVICE = "8f2c1c6e0c3a4b7e9d1f.access"


def new_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def kid_of(key):
    """Cloudflare's kids are 64 hex digits; here: SHA-256 of the public key's DER."""
    der = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(der).hexdigest()


def certificate(key):
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "paymos-test.cloudflareaccess.com")])
    start = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(int(kid_of(key)[:16], 16))
        .not_valid_before(start)
        .not_valid_after(start + dt.timedelta(days=3650))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def jwk_of(key):
    jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
    return {"kid": kid_of(key), "kty": "RSA", "alg": "RS256", "use": "sig", "e": jwk["e"], "n": jwk["n"]}


class PemAsHmacSecret(HMACAlgorithm):
    """HS256 keyed with whatever bytes it is given. PyJWT itself refuses a PEM public key as an
    HMAC secret (the classic algorithm-confusion attack); the attacker's token is made here on
    purpose, so that check is lifted for this one signer."""

    def prepare_key(self, key):
        return force_bytes(key)


def claims(**over):
    """An Access application token's payload, as Cloudflare documents it."""
    base = {
        "aud": [AUD],
        "email": EMAIL,
        "exp": NOW + 3600,
        "iat": NOW - 30,
        "nbf": NOW - 30,
        "iss": TEAM,
        "type": "app",
        "identity_nonce": "6ei69kawdKzMIAPF",
        "sub": "7335d417-61da-459d-899c-0a01c76a2f94",
        "country": "US",
    }
    for k, v in over.items():
        if v is None:
            base.pop(k, None)
        else:
            base[k] = v
    return base


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class FrozenClock(dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return dt.datetime.fromtimestamp(NOW, tz=tz)


def pyjwt_verdict(token, jwks):
    """What PyJWT's verifier says of the token at NOW, in paymos_core::access codes."""
    try:
        header = jwt.get_unverified_header(token)
    except jwt.DecodeError:
        return "access_token_malformed"
    # the key by kid, as PyJWT's own JWKS client finds it; no kid at all: the current key
    keyset = jwt.PyJWKSet.from_dict(jwks)
    try:
        key = keyset[header["kid"]].key if "kid" in header else keyset.keys[-1].key
    except KeyError:
        return "access_key_unknown"
    real = jwt.api_jwt.datetime
    jwt.api_jwt.datetime = FrozenClock
    try:
        payload = jwt.decode(
            token,
            key,
            algorithms=["RS256"],
            audience=AUD,
            issuer=TEAM,
            leeway=LEEWAY,
            options={"require": ["exp"]},
        )
    except jwt.InvalidAlgorithmError:
        return "access_algorithm_refused"
    except jwt.InvalidSignatureError:
        return "access_signature_invalid"
    except jwt.ExpiredSignatureError:
        return "access_token_expired"
    except jwt.ImmatureSignatureError:
        return "access_token_not_yet_valid"
    except jwt.InvalidAudienceError:
        return "access_audience_mismatch"
    except jwt.InvalidIssuerError:
        return "access_issuer_mismatch"
    except jwt.MissingRequiredClaimError as e:
        return {"exp": "access_token_malformed", "aud": "access_audience_mismatch", "iss": "access_issuer_mismatch"}[e.claim]
    except jwt.DecodeError:
        return "access_token_malformed"
    finally:
        jwt.api_jwt.datetime = real
    return ("ok", payload)


def build():
    current, previous, foreign = new_key(), new_key(), new_key()
    kid, kid_previous, kid_foreign = kid_of(current), kid_of(previous), kid_of(foreign)
    jwks = {
        "keys": [jwk_of(previous), jwk_of(current)],
        "public_cert": {"kid": kid, "cert": certificate(current)},
        "public_certs": [
            {"kid": kid_previous, "cert": certificate(previous)},
            {"kid": kid, "cert": certificate(current)},
        ],
    }
    public_pem = current.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)

    def rs(payload, key=current, kid=kid, alg="RS256", headers=None):
        h = {"kid": kid} if kid is not None else {}
        h.update(headers or {})
        return jwt.encode(payload, key, algorithm=alg, headers=h)

    hs = jwt.PyJWS()
    hs.unregister_algorithm("HS256")
    hs.register_algorithm("HS256", PemAsHmacSecret(PemAsHmacSecret.SHA256))
    hs_token = hs.encode(json.dumps(claims(), separators=(",", ":")).encode(), public_pem, algorithm="HS256", headers={"kid": kid})
    # the same attack by hand, to be sure the library did what it says: HMAC over the signing input
    signing_input, _, signature = hs_token.rpartition(".")
    assert b64(std_hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest()) == signature

    valid = rs(claims())
    head, body, sig = valid.split(".")
    forged_body = b64(json.dumps(claims(email="admin@example.com"), separators=(",", ":")).encode())

    V = []

    def vector(name, token, expect, actor=None, ours=None):
        V.append({"name": name, "token": token, "expect": expect, "actor": actor, "ours": ours})

    user = {"kind": "user", "name": EMAIL}
    vector("valid", valid, "ok", user)
    vector("valid_previous_key", rs(claims(), key=previous, kid=kid_previous), "ok", user)
    vector(
        "valid_service_token",
        rs(claims(email=None, sub="", identity_nonce=None, country=None, common_name=SERVICE)),
        "ok",
        {"kind": "service_token", "name": SERVICE},
    )
    vector("aud_as_string", rs(claims(aud=AUD)), "ok", user)
    vector("aud_array_other_first", rs(claims(aud=["another-application", AUD])), "ok", user)
    vector("iss_trailing_slash", rs(claims(iss=TEAM + "/")), "ok", user,
           ours="a trailing slash on iss is the same team domain (PyJWT compares exactly)")
    vector("exp_passed_within_leeway", rs(claims(exp=NOW - 30, iat=NOW - 600, nbf=NOW - 600)), "ok", user)
    vector("nbf_future_within_leeway", rs(claims(nbf=NOW + 30)), "ok", user)
    vector("iat_future_within_leeway", rs(claims(iat=NOW + 30)), "ok", user)
    vector("no_nbf_no_iat", rs(claims(nbf=None, iat=None)), "ok", user)

    vector("expired", rs(claims(exp=NOW - 3600, iat=NOW - 7200, nbf=NOW - 7200)), "access_token_expired")
    vector("expired_at_leeway_edge", rs(claims(exp=NOW - LEEWAY)), "access_token_expired")
    vector("nbf_future_beyond_leeway", rs(claims(nbf=NOW + 300)), "access_token_not_yet_valid")
    vector("iat_future_beyond_leeway", rs(claims(iat=NOW + 300)), "access_token_not_yet_valid")
    vector("no_exp", rs(claims(exp=None)), "access_token_malformed")
    vector("wrong_aud", rs(claims(aud=["another-application"])), "access_audience_mismatch")
    vector("no_aud", rs(claims(aud=None)), "access_audience_mismatch")
    vector("wrong_iss", rs(claims(iss="https://another-team.cloudflareaccess.com")), "access_issuer_mismatch")
    vector("no_iss", rs(claims(iss=None)), "access_issuer_mismatch")
    vector("no_actor", rs(claims(email=None)), "access_actor_missing",
           ours="the actor is the receiver's rule: email, or common_name for a service token")

    vector("alg_none", jwt.encode(claims(), None, algorithm="none", headers={"kid": kid}), "access_algorithm_refused")
    vector("hs256_public_key_as_secret", hs_token, "access_algorithm_refused")
    vector("rs384", rs(claims(), alg="RS384"), "access_algorithm_refused")
    vector("rs512", rs(claims(), alg="RS512"), "access_algorithm_refused")
    vector("foreign_key", rs(claims(), key=foreign, kid=kid_foreign), "access_key_unknown")
    vector("known_kid_other_key", rs(claims(), key=foreign, kid=kid), "access_signature_invalid")
    vector("payload_swapped", f"{head}.{forged_body}.{sig}", "access_signature_invalid")
    vector("signature_of_other_token", f"{head}.{body}.{rs(claims(email='x@example.com')).split('.')[2]}", "access_signature_invalid")
    vector("no_kid", rs(claims(), kid=None), "access_token_malformed",
           ours="a header without kid is malformed: Access always names its key")

    vector("garbage", "garbage", "access_token_malformed")
    vector("garbage_three_parts", "not.a.jwt", "access_token_malformed")
    vector("two_parts", f"{head}.{body}", "access_token_malformed")
    vector("four_parts", f"{valid}.{sig}", "access_token_malformed")
    vector("header_not_json", f"{b64(b'not json')}.{body}.{sig}", "access_token_malformed")

    for v in V:
        got = pyjwt_verdict(v["token"], jwks)
        verdict = got[0] if isinstance(got, tuple) else got
        if v["ours"] is None:
            assert verdict == v["expect"], f"{v['name']}: PyJWT says {verdict}, the vector says {v['expect']}"
        elif v["name"] == "no_actor":
            # PyJWT admits it (no actor rule); what it admits has neither email nor common_name
            assert verdict == "ok" and "email" not in got[1] and "common_name" not in got[1], v["name"]
        else:
            assert verdict != v["expect"], f"{v['name']}: listed as ours, but PyJWT agrees"
        v["pyjwt"] = verdict

    return {
        "generator": f"PyJWT {jwt.__version__} (make_access_vectors.py)",
        "now": NOW,
        "leeway": LEEWAY,
        "team_domain": TEAM,
        "audience": AUD,
        "jwks": jwks,
        "vectors": V,
    }


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args(argv[1:])
    doc = build()
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        f.write(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {len(doc['vectors'])} Access vectors to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
