"""`ssl.principal.mapping.rules`: a TLS client's certificate subject -> its principal's name.

As Kafka's SslPrincipalMapper parses and applies them. The setting is a comma-separated list of
rules, `DEFAULT` or `RULE:pattern/replacement/[L|U]`; `\\` escapes inside pattern and replacement
(so `\\/` is a slash, `\\,` a comma of the regex); empty entries are ignored. A subject is mapped
by the first rule that applies: DEFAULT applies to every name and keeps it; a RULE applies when
its pattern matches the whole name, which then becomes every match replaced by the replacement
(Java's `replaceAll`: `$n` is group n, `\\x` a literal x; a `$n` past the pattern's groups stays
literal text, Kafka's escapeLiteralBackReferences), lower- or upper-cased by L or U. No rule
applying is an error (Kafka's NoMatchingRule: the connection is refused).

The subject is the certificate's distinguished name as Java's `X500Principal.getName()` writes
it (RFC 2253, what Kafka maps): most specific attribute first (`CN=alice,OU=eng,O=acme,C=US`),
the keywords CN, C, L, ST, O, OU, STREET, DC, UID, any other attribute as its dotted OID with
its DER value in hex (`1.2.840.113549.1.9.1=#16...` for an email address), `,+"\\<>;` and a
leading `#` or space or a trailing space escaped with a backslash. `rfc2253_name` makes it from
a certificate's subject.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from cryptography import x509

from epochlog.security.principal import ANONYMOUS, KafkaPrincipal

DEFAULT_RULES = "DEFAULT"

# Kafka's RULE_PATTERN, RULE_SPLITTER and RULE_PARSER, character for character.
_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE_PATTERN)


class NoMatchingRuleError(ValueError):
    """No rule of ssl.principal.mapping.rules applies to a distinguished name."""


@dataclass(frozen=True)
class MappingRule:
    """One rule: DEFAULT (pattern None) or RULE:pattern/replacement/[LU]."""

    pattern: str | None
    replacement: str = ""
    to_lower: bool = False
    to_upper: bool = False
    compiled: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    substitute: Callable[[re.Match[str]], str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        compiled = substitute = None
        if self.pattern is not None:
            try:
                compiled = re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"Invalid rule pattern {self.pattern!r}: {exc}") from None
            substitute = _java_replacement(self.replacement, compiled.groups)
        # frozen: the derived fields are set once, here
        object.__setattr__(self, "compiled", compiled)
        object.__setattr__(self, "substitute", substitute)

    def apply(self, name: str) -> str | None:
        """The mapped name, or None when this rule does not apply to `name`."""
        if self.compiled is None or self.substitute is None:
            return name  # DEFAULT
        if self.compiled.fullmatch(name) is None:
            return None
        result = self.compiled.sub(self.substitute, name)
        if self.to_lower:
            return result.lower()
        if self.to_upper:
            return result.upper()
        return result

    def __str__(self) -> str:  # Kafka's Rule.toString
        if self.pattern is None:
            return "DEFAULT"
        text = f"RULE:{self.pattern}/{self.replacement}"
        if self.to_lower:
            text += "/L"
        elif self.to_upper:
            text += "/U"
        return text


class PrincipalMapper:
    """The parsed `ssl.principal.mapping.rules`; `name_of(dn)` applies them."""

    def __init__(self, rules: list[MappingRule]) -> None:
        self.rules = rules

    @classmethod
    def from_rules(cls, text: str | None) -> PrincipalMapper:
        """Parse the setting; ValueError names the rule that is not one."""
        return cls([rule for rule in map(_parse_rule, _split_rules(text)) if rule is not None])

    def name_of(self, distinguished_name: str) -> str:
        for rule in self.rules:
            name = rule.apply(distinguished_name)
            if name is not None:
                return name
        raise NoMatchingRuleError(
            f"No rules apply to {distinguished_name}, rules [{', '.join(map(str, self.rules))}]"
        )

    def __str__(self) -> str:  # Kafka's SslPrincipalMapper.toString
        return f"SslPrincipalMapper(rules = [{', '.join(map(str, self.rules))}])"


def _split_rules(text: str | None) -> list[str]:
    if text is None:
        text = DEFAULT_RULES
    return [m.group(1) for m in _RULE_SPLITTER.finditer(text.strip())]


def _parse_rule(rule: str) -> MappingRule | None:
    match = _RULE_PARSER.match(rule)  # Java's lookingAt
    if match is None:
        raise ValueError(f"Invalid rule: {rule}")
    if match.end() != len(rule):
        raise ValueError(
            f"Invalid rule: `{rule}`, unmatched substring: `{rule[match.end() :]}` "
            "(ssl.principal.mapping.rules: DEFAULT or RULE:pattern/replacement/[LU])"
        )
    if match.group(1) is not None:
        return MappingRule(None)
    if match.group(2) is not None:
        flag = match.group(6)
        return MappingRule(match.group(2), match.group(4), flag == "L", flag == "U")
    return None  # an empty entry


def _java_replacement(replacement: str, groups: int) -> Callable[[re.Match[str]], str]:
    """Java's replaceAll replacement as a function of the match: `\\x` is x, `$n` group n
    (more digits while the number stays a group), `$n` past the groups literal text."""
    parts: list[str | int] = []
    literal: list[str] = []
    i = 0
    while i < len(replacement):
        char = replacement[i]
        if char == "\\" and i + 1 < len(replacement):
            literal.append(replacement[i + 1])
            i += 2
            continue
        if char == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
            number = int(replacement[i + 1])
            j = i + 2
            if number > groups:  # Kafka escapes it: the text stays
                while j < len(replacement) and replacement[j].isdigit():
                    j += 1
                literal.append(replacement[i:j])
                i = j
                continue
            while j < len(replacement) and replacement[j].isdigit():
                longer = number * 10 + int(replacement[j])
                if longer > groups:
                    break
                number, j = longer, j + 1
            if literal:
                parts.append("".join(literal))
                literal = []
            parts.append(number)
            i = j
            continue
        literal.append(char)
        i += 1
    if literal:
        parts.append("".join(literal))

    def substitute(match: re.Match[str]) -> str:
        return "".join(p if isinstance(p, str) else (match.group(p) or "") for p in parts)

    return substitute


def certificate_principal(der: bytes | None, mapper: PrincipalMapper) -> KafkaPrincipal:
    """A TLS client's principal: `User:<mapped subject>` from its certificate (DER, as
    `SSLObject.getpeercert(binary_form=True)` gives it); ANONYMOUS without one. Raises
    NoMatchingRuleError when no rule maps the subject (Kafka then refuses the connection)."""
    if not der:
        return ANONYMOUS
    subject = rfc2253_name(x509.load_der_x509_certificate(der).subject)
    return KafkaPrincipal.user(mapper.name_of(subject))


# --------------------------------------------------------------- the subject as Java writes it

_RFC2253_KEYWORDS = {
    x509.NameOID.COMMON_NAME: "CN",
    x509.NameOID.COUNTRY_NAME: "C",
    x509.NameOID.LOCALITY_NAME: "L",
    x509.NameOID.STATE_OR_PROVINCE_NAME: "ST",
    x509.NameOID.ORGANIZATION_NAME: "O",
    x509.NameOID.ORGANIZATIONAL_UNIT_NAME: "OU",
    x509.NameOID.STREET_ADDRESS: "STREET",
    x509.NameOID.DOMAIN_COMPONENT: "DC",
    x509.NameOID.USER_ID: "UID",
}
_ESCAPED = frozenset(',+"\\<>;')
_UTF8_STRING_TAG = 0x0C


def rfc2253_name(name: x509.Name) -> str:
    """`name` as Java's X500Principal.getName() (RFC 2253) writes it."""
    rdns = []
    for rdn in reversed(list(name.rdns)):
        rdns.append("+".join(_attribute(attr) for attr in rdn))
    return ",".join(rdns)


def _attribute(attr: x509.NameAttribute) -> str:
    keyword = _RFC2253_KEYWORDS.get(attr.oid)
    value = attr.value if isinstance(attr.value, str) else attr.value.decode("latin-1")
    if keyword is None:
        return f"{attr.oid.dotted_string}=#{_der_value(attr, value).hex()}"
    return f"{keyword}={_escape(value)}"


def _der_value(attr: x509.NameAttribute, value: str) -> bytes:
    """The attribute value's DER encoding (tag, length, bytes), as Java prints unknown OIDs."""
    asn1_type = getattr(attr, "_type", None)  # cryptography keeps the string type it parsed
    tag = int(getattr(asn1_type, "value", _UTF8_STRING_TAG))
    body = value.encode("utf-16-be" if tag == 0x1E else "utf-8")
    length = len(body)
    if length < 0x80:
        header = bytes([tag, length])
    else:
        size = length.to_bytes((length.bit_length() + 7) // 8, "big")
        header = bytes([tag, 0x80 | len(size)]) + size
    return header + body


def _escape(value: str) -> str:
    out = []
    for index, char in enumerate(value):
        if (
            char in _ESCAPED
            or (index == 0 and char in "# ")
            or (index == len(value) - 1 and char == " ")
        ):
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)
