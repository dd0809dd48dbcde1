#!/usr/bin/env python3
"""Independent signature vectors for paymos-core (Python stdlib hmac/hashlib only).

    python3 make_vectors.py          # (re)write signatures.json next to this file
    python3 make_vectors.py --check  # regenerate in memory; exit 0 if the file matches, 1 if not

v1 = lowercase hex HMAC-SHA256(key = secret's UTF-8 bytes incl. "whsec_",
                               msg = "<t>." + body's UTF-8 bytes)   (docs/interface.md section 1)
Everything is deterministic, so the check is byte-for-byte.
"""
import hashlib
import hmac
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "signatures.json")

CONTRACT_BODY = (
    '{"event_id":"evt_9Kq2xT4mLp","type":"invoice.paid","created":1764449990,'
    '"livemode":false,"data":{"id":"inv_7Hc3pQ","object":"invoice","status":"paid",'
    '"amount":"49.00","currency":"USDT","order_ref":"order_1042"}}'
)


def big_body(size):
    """A JSON body of exactly `size` UTF-8 bytes (mixing ASCII and multi-byte chars)."""
    head = '{"event_id":"evt_big16k","type":"invoice.paid","created":1764449990,"data":{"id":"inv_big16k","blob":"'
    tail = '"}}'
    unit = "0123456789abcdef\u00e9\u4e2d"  # 16 + 2 + 3 bytes
    fill = size - len(head.encode()) - len(tail.encode())
    blob = ""
    while len((blob + unit).encode()) <= fill:
        blob += unit
    blob += "x" * (fill - len(blob.encode()))
    body = head + blob + tail
    assert len(body.encode("utf-8")) == size
    return body


CASES = [
    # (secret, t, body)
    ("whsec_test_new_6f1d2a9c", 1764450000, CONTRACT_BODY),
    ("whsec_test_old_03b7e4aa", 1764450000, CONTRACT_BODY),
    ("whsec_test_new_6f1d2a9c", 1764450000, ""),
    ("whsec_test_new_6f1d2a9c", 0, "{}"),
    ("whsec_space_body", 9999999999, " "),
    ("whsec_unicode", 1764450001, '{"note":"caf\u00e9 \u4e2d\u6587 \U0001F4B8 \u00fc\u00df","q":"\\"quoted\\""}'),
    ("whsec_quotes", 1764450002, 'He said "pay" \'now\'\nline2\r\n\ttabbed\\back\\slash'),
    ("whsec_nul_and_controls", 1764450003, "a\u0000b\u0001c\u001f\u007f"),
    ("whsec_\u00fcnicode_s\u00e9cret_\U0001F511", 1764450004, CONTRACT_BODY),
    ("no_prefix_secret", 1764450005, CONTRACT_BODY),
    # Longer than the SHA-256 block (64 bytes): HMAC hashes the key first.
    ("whsec_" + "k" * 94, 1764450006, CONTRACT_BODY),
    ("whsec_big", 1764450007, big_body(16 * 1024)),
    ("whsec_trailing_newline", 1764450008, CONTRACT_BODY + "\n"),
]


def v1(secret, t, body):
    msg = str(t).encode("ascii") + b"." + body.encode("utf-8")
    return hmac.new(secret.encode("utf-8"), msg, hashlib.sha256).hexdigest()


def render():
    vectors = [{"secret": s, "t": t, "body": b, "v1": v1(s, t, b)} for (s, t, b) in CASES]
    # Sanity: the contract's published values.
    assert vectors[0]["v1"] == "80ba6d2ac4725a807b1570f1407b0c5efde893bb29315d9861967a9c5afe0c86"
    assert vectors[1]["v1"] == "bc9cc7d8599f46563d7c9bed1f394b9aa7100e35121ccb50ed69aadc3002733b"
    return json.dumps(vectors, indent=2, ensure_ascii=False) + "\n"


def main(argv):
    text = render()
    if "--check" in argv[1:]:
        try:
            with open(OUT, encoding="utf-8") as f:
                current = f.read()
        except OSError as e:
            print(f"cannot read {OUT}: {e}", file=sys.stderr)
            return 1
        if current != text:
            print(f"{OUT} is out of date; run make_vectors.py", file=sys.stderr)
            return 1
        return 0
    with open(OUT, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    print(f"wrote {len(CASES)} vectors to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
