"""DescribeAcls (API key 29), CreateAcls (30) and DeleteAcls (31): ACL bindings by resource
pattern and entry.

Transcribed from Kafka's `common/message/{Describe,Create,Delete}Acls{Request,Response}.json`
(Kafka 3.9: versions 0-3; v1 adds the resource pattern type, default LITERAL (3); v2 is the
first flexible version; v3 allows resource type USER). Codes are Kafka's: resource type
(1 ANY, 2 TOPIC, 3 GROUP, 4 CLUSTER, 5 TRANSACTIONAL_ID, 6 DELEGATION_TOKEN, 7 USER), pattern
type (1 ANY, 2 MATCH, 3 LITERAL, 4 PREFIXED), operation (1 ANY, 2 ALL, 3 READ, ...), permission
(1 ANY, 2 DENY, 3 ALLOW). A null name, principal or host in a filter matches anything.
"""

from epochlog.protocol.schema import F, message

_VALID = "0-3"
_FLEXIBLE = "2+"


def _filter_fields() -> list:
    return [
        F("ResourceTypeFilter", "int8", "0+"),
        F("ResourceNameFilter", "string", "0+", nullable="0+", default=None),
        F("PatternTypeFilter", "int8", "1+", default=3),
        F("PrincipalFilter", "string", "0+", nullable="0+", default=None),
        F("HostFilter", "string", "0+", nullable="0+", default=None),
        F("Operation", "int8", "0+"),
        F("PermissionType", "int8", "0+"),
    ]


DESCRIBE_REQUEST = message(
    "DescribeAclsRequest", api_key=29, valid=_VALID, flexible=_FLEXIBLE, fields=_filter_fields()
)

DESCRIBE_RESPONSE = message(
    "DescribeAclsResponse",
    api_key=29,
    valid=_VALID,
    flexible=_FLEXIBLE,
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
        F(
            "Resources",
            "[]DescribeAclsResource",
            "0+",
            [
                F("ResourceType", "int8", "0+"),
                F("ResourceName", "string", "0+"),
                F("PatternType", "int8", "1+", default=3),
                F(
                    "Acls",
                    "[]AclDescription",
                    "0+",
                    [
                        F("Principal", "string", "0+"),
                        F("Host", "string", "0+"),
                        F("Operation", "int8", "0+"),
                        F("PermissionType", "int8", "0+"),
                    ],
                ),
            ],
        ),
    ],
)

CREATE_REQUEST = message(
    "CreateAclsRequest",
    api_key=30,
    valid=_VALID,
    flexible=_FLEXIBLE,
    fields=[
        F(
            "Creations",
            "[]AclCreation",
            "0+",
            [
                F("ResourceType", "int8", "0+"),
                F("ResourceName", "string", "0+"),
                F("ResourcePatternType", "int8", "1+", default=3),
                F("Principal", "string", "0+"),
                F("Host", "string", "0+"),
                F("Operation", "int8", "0+"),
                F("PermissionType", "int8", "0+"),
            ],
        )
    ],
)

CREATE_RESPONSE = message(
    "CreateAclsResponse",
    api_key=30,
    valid=_VALID,
    flexible=_FLEXIBLE,
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "Results",
            "[]AclCreationResult",
            "0+",
            [
                F("ErrorCode", "int16", "0+"),
                F("ErrorMessage", "string", "0+", nullable="0+", default=None),
            ],
        ),
    ],
)

DELETE_REQUEST = message(
    "DeleteAclsRequest",
    api_key=31,
    valid=_VALID,
    flexible=_FLEXIBLE,
    fields=[F("Filters", "[]DeleteAclsFilter", "0+", _filter_fields())],
)

DELETE_RESPONSE = message(
    "DeleteAclsResponse",
    api_key=31,
    valid=_VALID,
    flexible=_FLEXIBLE,
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "FilterResults",
            "[]DeleteAclsFilterResult",
            "0+",
            [
                F("ErrorCode", "int16", "0+"),
                F("ErrorMessage", "string", "0+", nullable="0+", default=None),
                F(
                    "MatchingAcls",
                    "[]DeleteAclsMatchingAcl",
                    "0+",
                    [
                        F("ErrorCode", "int16", "0+"),
                        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
                        F("ResourceType", "int8", "0+"),
                        F("ResourceName", "string", "0+"),
                        F("PatternType", "int8", "1+", default=3),
                        F("Principal", "string", "0+"),
                        F("Host", "string", "0+"),
                        F("Operation", "int8", "0+"),
                        F("PermissionType", "int8", "0+"),
                    ],
                ),
            ],
        ),
    ],
)
