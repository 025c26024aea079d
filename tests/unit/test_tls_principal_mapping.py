"""ssl.principal.mapping.rules as Kafka parses and applies them (Kafka's SslPrincipalMapperTest),
and a certificate subject written as Java's X500Principal.getName() writes it."""

from __future__ import annotations

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from epochlog.security.principal_mapping import (
    NoMatchingRuleError,
    PrincipalMapper,
    rfc2253_name,
)


@pytest.mark.parametrize(
    "rules",
    [
        "DEFAULT",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
        "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
        "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
        "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    ],
)
def test_kafkas_valid_rules_parse(rules: str) -> None:
    assert PrincipalMapper.from_rules(rules).rules


@pytest.mark.parametrize(
    "rules",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    ],
)
def test_kafkas_invalid_rules_are_refused_naming_the_rule(rules: str) -> None:
    with pytest.raises(ValueError, match="Invalid rule"):
        PrincipalMapper.from_rules(rules)


def test_first_matching_rule_maps_the_name_as_kafka_does() -> None:
    mapper = PrincipalMapper.from_rules(
        ", ".join(
            [
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
                "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
                "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
                "DEFAULT",
            ]
        )
    )
    assert mapper.name_of("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name_of("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name_of("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name_of("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert (
        mapper.name_of("OU=JavaSoft,O=Sun Microsystems,C=US")
        == "OU=JavaSoft,O=Sun Microsystems,C=US"
    )


@pytest.mark.parametrize(
    ("expected", "rules"),
    [
        ("[]", ""),
        ("[DEFAULT]", "DEFAULT"),
        ("[RULE:/]", "RULE://"),
        ("[RULE:/.*]", "RULE:/.*/"),
        ("[RULE:/.*/L]", "RULE:/.*/L"),
        ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
        ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
        ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
        ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
        (
            "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
            "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ",
        ),
        ("[]", ",   , , ,      , , ,   "),
        ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
        ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
        ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
        ("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"),
        ("[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]", "RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/"),
        (
            "[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, "
            "/DEFAULT, DEFAULT]",
            "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, "
            "/DEFAULT/,DEFAULT",
        ),
    ],
)
def test_rules_split_as_kafka_splits_them(expected: str, rules: str) -> None:
    assert str(PrincipalMapper.from_rules(rules)) == f"SslPrincipalMapper(rules = {expected})"


def test_escaped_comma_inside_a_name() -> None:
    mapper = PrincipalMapper.from_rules("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name_of("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_back_reference_past_the_groups_stays_literal() -> None:
    mapper = PrincipalMapper.from_rules("RULE:^CN=(\\w+),.*$/$1@$4/")
    assert mapper.name_of("CN=alice,O=acme") == "alice@$4"


def test_no_rule_applying_is_an_error_naming_the_name() -> None:
    mapper = PrincipalMapper.from_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    with pytest.raises(NoMatchingRuleError, match="CN=bob,O=acme"):
        mapper.name_of("CN=bob,O=acme")


def test_unset_rules_are_default() -> None:
    assert PrincipalMapper.from_rules(None).name_of("CN=a,O=b") == "CN=a,O=b"


def test_subject_written_as_java_writes_it_most_specific_first_with_escapes() -> None:
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
            x509.NameAttribute(NameOID.STATE_OR_PROVINCE_NAME, "CA"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme, Inc"),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
            x509.NameAttribute(NameOID.COMMON_NAME, "alice"),
        ]
    )
    assert rfc2253_name(name) == "CN=alice,OU=eng,O=Acme\\, Inc,ST=CA,C=US"


def test_subject_with_an_email_address_prints_its_oid_and_der_hex() -> None:
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, "bob"),
            x509.NameAttribute(NameOID.EMAIL_ADDRESS, "b@x.io"),
        ]
    )
    # Java: 1.2.840.113549.1.9.1=#1606624078 2e696f (IA5String "b@x.io")
    assert rfc2253_name(name) == "1.2.840.113549.1.9.1=#16066240782e696f,CN=bob"
