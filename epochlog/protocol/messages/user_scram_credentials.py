"""DescribeUserScramCredentials (API key 50) and AlterUserScramCredentials (51), KIP-554.

Transcribed from Kafka's `common/message/{Describe,Alter}UserScramCredentials*.json`: version 0
only, flexible. Mechanism bytes: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512 (0 unknown). A null Users
list describes every user. An upsertion carries the salt and the salted password (never the
password); the broker derives StoredKey and ServerKey from it.
"""

from epochlog.protocol.schema import F, message

DESCRIBE_REQUEST = message(
    "DescribeUserScramCredentialsRequest",
    api_key=50,
    valid="0",
    flexible="0+",
    fields=[
        F("Users", "[]UserName", "0+", [F("Name", "string", "0+")], nullable="0+", default=None),
    ],
)

DESCRIBE_RESPONSE = message(
    "DescribeUserScramCredentialsResponse",
    api_key=50,
    valid="0",
    flexible="0+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
        F(
            "Results",
            "[]DescribeUserScramCredentialsResult",
            "0+",
            [
                F("User", "string", "0+"),
                F("ErrorCode", "int16", "0+"),
                F("ErrorMessage", "string", "0+", nullable="0+", default=None),
                F(
                    "CredentialInfos",
                    "[]CredentialInfo",
                    "0+",
                    [F("Mechanism", "int8", "0+"), F("Iterations", "int32", "0+")],
                ),
            ],
        ),
    ],
)

ALTER_REQUEST = message(
    "AlterUserScramCredentialsRequest",
    api_key=51,
    valid="0",
    flexible="0+",
    fields=[
        F(
            "Deletions",
            "[]ScramCredentialDeletion",
            "0+",
            [F("Name", "string", "0+"), F("Mechanism", "int8", "0+")],
        ),
        F(
            "Upsertions",
            "[]ScramCredentialUpsertion",
            "0+",
            [
                F("Name", "string", "0+"),
                F("Mechanism", "int8", "0+"),
                F("Iterations", "int32", "0+"),
                F("Salt", "bytes", "0+"),
                F("SaltedPassword", "bytes", "0+"),
            ],
        ),
    ],
)

ALTER_RESPONSE = message(
    "AlterUserScramCredentialsResponse",
    api_key=51,
    valid="0",
    flexible="0+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "Results",
            "[]AlterUserScramCredentialsResult",
            "0+",
            [
                F("User", "string", "0+"),
                F("ErrorCode", "int16", "0+"),
                F("ErrorMessage", "string", "0+", nullable="0+", default=None),
            ],
        ),
    ],
)
