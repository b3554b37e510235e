"""RocketMQ's ACL on the client side: the account's keys and the signature on every request
(RocketMQ's AclClientRPCHook)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

from staticmq_spark.errors import InvalidArgumentError
from staticmq_spark.protocol.security.auth import Credentials, credentials_of


def sign_request(credentials: Credentials, ext: dict[str, str], body: bytes) -> None:
    """RocketMQ's AclClientRPCHook: HmacSHA1 over the sorted extFields values, then the body."""
    ext["AccessKey"] = credentials.access_key
    if credentials.security_token:
        ext["SecurityToken"] = credentials.security_token
    content = "".join(ext[k] for k in sorted(ext) if k != "Signature").encode() + body
    digest = hmac.new(credentials.secret_key.encode(), content, hashlib.sha1).digest()
    ext["Signature"] = base64.b64encode(digest).decode()


ACCESS_KEY_ENV = "ROCKETMQ_ACCESS_KEY"
SECRET_KEY_ENV = "ROCKETMQ_SECRET_KEY"


def credentials_from(access_key: str = "", secret_key: str = "") -> Credentials | None:
    """Keys given, else ROCKETMQ_ACCESS_KEY / ROCKETMQ_SECRET_KEY from the environment, else None."""
    access_key = access_key or os.environ.get(ACCESS_KEY_ENV, "")
    secret_key = secret_key or os.environ.get(SECRET_KEY_ENV, "")
    if bool(access_key) != bool(secret_key):
        raise InvalidArgumentError("RocketMQ credentials need both an access key and a secret key")
    return Credentials(access_key, secret_key) if access_key else None


def rocketmq_credentials(credentials: Credentials | tuple[str, str] | None) -> Credentials | None:
    """A client's `credentials=` for RocketMQ (None: ROCKETMQ_ACCESS_KEY / ROCKETMQ_SECRET_KEY)."""
    return credentials_of(credentials)  # None: RemotingClient reads the environment
