"""Extract the protocol facts of Kafka's message definitions into the test data beside this file.

Usage: python extract.py SOURCE_DIR OUT_DIR NAME...   (NAME: e.g. FetchRequest)

SOURCE_DIR holds Kafka's `common/message/<Name>.json` files (JSON with `//` comments). Each
output file keeps only what the wire layout depends on: the message's api key, kind, valid,
flexible and unstable-latest versions, and for every field its name, type, versions, nullable,
tagged and flexible versions, tag, default and nested fields (common structs likewise). Comments,
`about` texts and the other annotations are left out.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

MESSAGE_KEYS = ("apiKey", "type", "name", "validVersions", "flexibleVersions")
FIELD_KEYS = (
    "name",
    "type",
    "versions",
    "nullableVersions",
    "taggedVersions",
    "tag",
    "flexibleVersions",
    "default",
    "ignorable",
)


def strip_comments(text: str) -> str:
    """Drop `//` comments (Kafka's files have none inside strings)."""
    return "\n".join(re.sub(r"^\s*//.*$", "", line) for line in text.splitlines())


def facts_of_field(field: dict[str, Any]) -> dict[str, Any]:
    out = {key: field[key] for key in FIELD_KEYS if key in field}
    if "fields" in field:
        out["fields"] = [facts_of_field(f) for f in field["fields"]]
    return out


def facts_of_message(message: dict[str, Any]) -> dict[str, Any]:
    out = {key: message[key] for key in MESSAGE_KEYS if key in message}
    if message.get("latestVersionUnstable"):
        out["latestVersionUnstable"] = True
    out["fields"] = [facts_of_field(f) for f in message["fields"]]
    if "commonStructs" in message:
        out["commonStructs"] = [
            {
                "name": s["name"],
                "versions": s["versions"],
                "fields": [facts_of_field(f) for f in s["fields"]],
            }
            for s in message["commonStructs"]
        ]
    return out


def main(source: str, out: str, names: list[str]) -> None:
    Path(out).mkdir(parents=True, exist_ok=True)
    for name in names:
        message = json.loads(strip_comments((Path(source) / f"{name}.json").read_text()))
        facts = facts_of_message(message)
        (Path(out) / f"{name}.json").write_text(json.dumps(facts, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
