"""Authentication and authorization: request signing and client credentials (auth.py), ACL files
and permission decisions (acl.py)."""
