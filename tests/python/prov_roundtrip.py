"""Validates weft's PROV-JSON with the W3C `prov` package by round-tripping it.

Reads a PROV-JSON document on stdin; deserialises it, serialises it again, deserialises that,
and checks both documents are equal and hold the expected numbers of records (argv:
entities activities agents derivations generations attributions usages
associations). Exits non-zero on
any difference, or when the document serialised as PROV-XML does not validate against the
W3C PROV-XML schema.
"""
import io
import json
import sys

from prov.model import ProvDocument, ProvEntity, ProvActivity, ProvAgent
from prov.model import ProvDerivation, ProvGeneration, ProvAttribution, ProvUsage, ProvAssociation

text = sys.stdin.read()
document = ProvDocument.deserialize(content=text, format="json")
again = ProvDocument.deserialize(content=document.serialize(format="json"), format="json")
if document != again:
    sys.exit("the document changed in a round trip")
expected = [int(n) for n in sys.argv[1:]]
kinds = [ProvEntity, ProvActivity, ProvAgent, ProvDerivation, ProvGeneration, ProvAttribution, ProvUsage, ProvAssociation]
found = [sum(1 for record in document.get_records() if isinstance(record, kind)) for kind in kinds]
if expected and found != expected:
    sys.exit(f"expected {expected} records by kind, found {found}")
# Every relation points at declared elements.
declared = {str(record.identifier) for record in document.get_records() if isinstance(record, (ProvEntity, ProvActivity, ProvAgent))}
for record in document.get_records():
    if isinstance(record, (ProvDerivation, ProvGeneration, ProvAttribution, ProvUsage, ProvAssociation)):
        for _, value in record.formal_attributes:
            if value is not None and str(value) not in declared:
                sys.exit(f"{record} points at undeclared {value}")
# PROV-XML: the same document serialised as XML validates against the W3C schema the prov
# package ships (every prov:id an xsd:QName, so no `%` or second `:` in a local part).
import os
from lxml import etree
import prov
schema_path = os.path.join(os.path.dirname(prov.__file__), "tests", "schemas", "prov.xsd")
schema = etree.XMLSchema(etree.parse(schema_path))
xml = etree.fromstring(document.serialize(format="xml").encode())
if not schema.validate(xml):
    sys.exit(f"PROV-XML does not validate: {schema.error_log.last_error}")
print("ok", found)
