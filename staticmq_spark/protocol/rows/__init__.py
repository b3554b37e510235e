"""Packed message rows, the one wire and storage format of a batch of messages (codec.py), encoded
from and decoded into Arrow columns (encode.py, decode.py) built on numpy buffers (arrays.py)."""
