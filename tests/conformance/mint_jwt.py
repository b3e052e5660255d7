"""Mints the deliberately bad tokens of the failure-contract run of `cargo xtask conformance`
(expired, not yet valid, wrong issuer or audience, `alg: none`, wrong secret): the gateway's own
`mcp-gateway token` only mints good ones.

    python mint_jwt.py SECRET_HEX ALG CLAIMS_JSON

ALG is `HS256` (signed with the UTF-8 bytes of SECRET_HEX, as the gateway reads its secret
variable) or `none` (no signature). CLAIMS_JSON values `"now+N"` / `"now-N"` become the current
Unix time plus or minus N seconds. Prints the compact JWS.
"""

import base64
import hashlib
import hmac
import json
import sys
import time


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def main() -> None:
    secret, alg, claims = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    now = int(time.time())
    for key, value in claims.items():
        if isinstance(value, str) and value.startswith("now"):
            claims[key] = now + int(value[3:] or 0)
    header = b64(json.dumps({"alg": alg, "typ": "JWT"}).encode())
    payload = b64(json.dumps(claims).encode())
    signing_input = f"{header}.{payload}".encode()
    if alg == "none":
        signature = ""
    else:
        signature = b64(hmac.new(secret.encode(), signing_input, hashlib.sha256).digest())
    print(f"{header}.{payload}.{signature}")


if __name__ == "__main__":
    main()
