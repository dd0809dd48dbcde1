#!/usr/bin/env python3
"""Independent Standard Webhooks vectors for paymos-core's standard_webhooks module
(docs/interface.md section 7), made with Python's stdlib hmac/hashlib/base64 only.

    python3 make_standard_webhooks.py          # (re)write standard_webhooks.json next to this file
    python3 make_standard_webhooks.py --check  # regenerate in memory; exit 0 if the file matches, 1 if not

signature = "v1," + base64( HMAC-SHA256( key = base64-decoded part of "whsec_<base64>",
                                         msg = "<msg_id>.<timestamp>.<body>" ) )

When the `standardwebhooks` package (the reference Python library) is importable, every
vector is also signed with it and compared, and a fresh signature made here with the current
time is verified by it. It is optional: without it the stdlib implementation stands alone.
Everything written to the file is deterministic, so the check is byte-for-byte.
"""
import base64
import hashlib
import hmac
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "standard_webhooks.json")


def whsec(key: bytes, padded: bool = True) -> str:
    b64 = base64.b64encode(key).decode("ascii")
    return "whsec_" + (b64 if padded else b64.rstrip("="))


def key_of(secret: str) -> bytes:
    assert secret.startswith("whsec_")
    b64 = secret[len("whsec_"):]
    b64 += "=" * (-len(b64) % 4)
    return base64.b64decode(b64, validate=True)


def sign(secret: str, msg_id: str, timestamp: int, body: str) -> str:
    msg = f"{msg_id}.{timestamp}.".encode("utf-8") + body.encode("utf-8")
    mac = hmac.new(key_of(secret), msg, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode("ascii")


EFFECT_BODY = (
    '{"id":"eff_7Hc3pQf1","kind":"fulfilment","resource_id":"inv_7Hc3pQ","order_ref":"order_1042",'
    '"license_code":"LC-3F9A-77B2-0C1D-E4A5","amount":"49.00","currency":"USDT","cause":"evt_9Kq2xT4mLp",'
    '"created_at":"2025-11-29T21:00:00Z"}'
)


def big_body(size):
    """A JSON body of exactly `size` UTF-8 bytes."""
    head = '{"id":"eff_big","blob":"'
    tail = '"}'
    unit = "0123456789abcdef\u00e9\u4e2d"
    fill = size - len(head.encode()) - len(tail.encode())
    blob = ""
    while len((blob + unit).encode()) <= fill:
        blob += unit
    blob += "x" * (fill - len(blob.encode()))
    body = head + blob + tail
    assert len(body.encode("utf-8")) == size
    return body


# The example from the Standard Webhooks specification / reference libraries' tests.
SPEC = (
    "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "msg_p5jXN8AQM9LWM0D4loKWxJek",
    1614265330,
    '{"test": 2432232314}',
)
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

CASES = [
    # (secret, msg_id, timestamp, body)
    SPEC,
    (whsec(bytes(range(32))), "eff_7Hc3pQf1", 1764450000, EFFECT_BODY),
    (whsec(bytes(range(32))), "eff_7Hc3pQf1", 1764450001, EFFECT_BODY),
    (whsec(bytes(range(32))), "eff_other", 1764450000, EFFECT_BODY),
    (whsec(b"\xff" * 24), "eff_empty", 1764450002, ""),
    (whsec(b"k"), "eff_onebyte", 1764450003, "{}"),
    # unpadded secret (the libraries accept it): 31 bytes -> one '=' dropped
    (whsec(bytes(range(100, 131)), padded=False), "eff_unpadded", 1764450004, EFFECT_BODY),
    # a key longer than the SHA-256 block (64 bytes): HMAC hashes the key first
    (whsec(bytes(range(200))[:100]), "eff_longkey", 1764450005, EFFECT_BODY),
    (whsec(b"unicode key bytes \x00\x01"), "eff_unicode", 1764450006,
     '{"note":"caf\u00e9 \u4e2d\u6587 \U0001F4B8 \u00fc\u00df","q":"\\"quoted\\""}'),
    (whsec(b"quotes and newlines"), "msg_2bW9.with.dots", 1764450007,
     'He said "ship" \'now\'\nline2\r\n\ttabbed\\back\\slash'),
    (whsec(b"big body key 0123456789abcdef"), "eff_big", 1764450008, big_body(16 * 1024)),
    (whsec(b"trailing newline"), "eff_nl", 1764450009, EFFECT_BODY + "\n"),
    (whsec(b"zero time"), "eff_zero", 0, "{}"),
]


def render():
    vectors = [
        {
            "secret": s,
            "key_hex": key_of(s).hex(),
            "msg_id": m,
            "timestamp": t,
            "body": b,
            "signature": sign(s, m, t, b),
        }
        for (s, m, t, b) in CASES
    ]
    assert vectors[0]["signature"] == SPEC_SIGNATURE, vectors[0]["signature"]
    return json.dumps(vectors, indent=2, ensure_ascii=False) + "\n"


def cross_check_with_library():
    """Compares with the reference `standardwebhooks` package when it is installed."""
    try:
        from datetime import datetime, timezone

        import standardwebhooks
        from standardwebhooks import Webhook
    except ImportError:
        print("standardwebhooks is not installed: stdlib implementation only", file=sys.stderr)
        return
    for (s, m, t, b) in CASES:
        theirs = Webhook(s).sign(m, datetime.fromtimestamp(t, tz=timezone.utc), b)
        assert theirs == sign(s, m, t, b), (m, theirs)
    # their verifier accepts ours (fresh timestamp: it checks the 5-minute tolerance) ...
    now = int(time.time())
    for (s, m, _, b) in CASES:
        headers = {"webhook-id": m, "webhook-timestamp": str(now), "webhook-signature": sign(s, m, now, b)}
        Webhook(s).verify(b.encode("utf-8"), headers, json_parse=False)
    # ... and refuses a tampered body
    s, m, _, b = CASES[1]
    headers = {"webhook-id": m, "webhook-timestamp": str(now), "webhook-signature": sign(s, m, now, b)}
    try:
        Webhook(s).verify((b + " ").encode("utf-8"), headers, json_parse=False)
    except standardwebhooks.webhooks.WebhookVerificationError:
        pass
    else:
        raise AssertionError("standardwebhooks accepted a tampered body")
    version = getattr(standardwebhooks, "__version__", "?")
    print(f"cross-checked {len(CASES)} vectors with standardwebhooks {version}", file=sys.stderr)


def main(argv):
    text = render()
    cross_check_with_library()
    if "--check" in argv[1:]:
        try:
            with open(OUT, encoding="utf-8") as f:
                current = f.read()
        except OSError as e:
            print(f"cannot read {OUT}: {e}", file=sys.stderr)
            return 1
        if current != text:
            print(f"{OUT} is out of date; run make_standard_webhooks.py", file=sys.stderr)
            return 1
        return 0
    with open(OUT, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    print(f"wrote {len(CASES)} vectors to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
