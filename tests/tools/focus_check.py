#!/usr/bin/python3
"""Checks a CSV file against the FOCUS 1.2 specification (FinOps Open Cost and Usage
Specification, github.com/FinOps-Open-Cost-and-Usage-Spec/FOCUS_Spec, tag v1.2): every
Mandatory column, the columns' names, data types, value formats, allowed values, nulls, and the
rules between columns that apply to what the file holds. An empty field is null (the
specification names no file format; this is the usual CSV reading of null).

  focus_check.py FILE     prints each problem and exits 1 if there is any

Written from the specification's column and attribute files (specification/columns/*.md,
specification/attributes/*.md at v1.2); docs/focus.md says which gpumeter writes and why.
"""
import csv
import io
import json
import re
import sys

MANDATORY = ["BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodEnd",
             "BillingPeriodStart", "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargePeriodEnd",
             "ChargePeriodStart", "ContractedCost", "EffectiveCost", "InvoiceIssuerName", "ListCost",
             "PricingQuantity", "PricingUnit", "ProviderName", "PublisherName", "ServiceCategory", "ServiceName"]
CONDITIONAL = ["BillingAccountType", "CapacityReservationId", "CapacityReservationStatus", "CommitmentDiscountCategory",
               "CommitmentDiscountId", "CommitmentDiscountName", "CommitmentDiscountQuantity",
               "CommitmentDiscountStatus", "CommitmentDiscountType", "CommitmentDiscountUnit", "ConsumedQuantity",
               "ConsumedUnit", "ContractedUnitPrice", "ListUnitPrice", "PricingCategory", "PricingCurrency",
               "PricingCurrencyContractedUnitPrice", "PricingCurrencyEffectiveCost", "PricingCurrencyListUnitPrice",
               "RegionId", "RegionName", "ResourceId", "ResourceName", "ResourceType", "SkuId", "SkuMeter",
               "SkuPriceDetails", "SkuPriceId", "SubAccountId", "SubAccountName", "SubAccountType", "Tags"]
RECOMMENDED = ["AvailabilityZone", "ChargeFrequency", "InvoiceId", "ServiceSubcategory"]
FOCUS_COLUMNS = set(MANDATORY + CONDITIONAL + RECOMMENDED)

DECIMAL = {"BilledCost", "ContractedCost", "EffectiveCost", "ListCost", "PricingQuantity", "ConsumedQuantity",
           "ContractedUnitPrice", "ListUnitPrice", "CommitmentDiscountQuantity", "PricingCurrencyContractedUnitPrice",
           "PricingCurrencyEffectiveCost", "PricingCurrencyListUnitPrice"}
NON_NEGATIVE = {"ContractedUnitPrice", "ListUnitPrice", "PricingCurrencyContractedUnitPrice",
                "PricingCurrencyListUnitPrice"}
DATETIME = {"BillingPeriodEnd", "BillingPeriodStart", "ChargePeriodEnd", "ChargePeriodStart"}
JSON_COLUMNS = {"Tags", "SkuPriceDetails"}
NOT_NULL = {"BilledCost", "BillingAccountId", "BillingCurrency", "BillingPeriodEnd", "BillingPeriodStart",
            "ChargeCategory", "ChargePeriodEnd", "ChargePeriodStart", "ContractedCost", "EffectiveCost",
            "InvoiceIssuerName", "ListCost", "ProviderName", "PublisherName", "ServiceCategory", "ServiceName",
            "ChargeFrequency", "ServiceSubcategory"}
ALLOWED = {
    "ChargeCategory": {"Usage", "Purchase", "Tax", "Credit", "Adjustment"},
    "ChargeClass": {"Correction"},
    "ChargeFrequency": {"One-Time", "Recurring", "Usage-Based"},
    "PricingCategory": {"Standard", "Dynamic", "Committed", "Other"},
    "CommitmentDiscountCategory": {"Spend", "Usage"},
    "CommitmentDiscountStatus": {"Used", "Unused"},
    "CapacityReservationStatus": {"Used", "Unused"},
}
SUBCATEGORIES = {
    "AI and Machine Learning": ["AI Platforms", "Bots", "Generative AI", "Machine Learning",
                                "Natural Language Processing"],
    "Analytics": ["Analytics Platforms", "Business Intelligence", "Data Processing", "Search", "Streaming Analytics"],
    "Business Applications": ["Productivity and Collaboration"],
    "Compute": ["Containers", "End User Computing", "Quantum Compute", "Serverless Compute", "Virtual Machines"],
    "Databases": ["Caching", "Data Warehouses", "Ledger Databases", "NoSQL Databases", "Relational Databases",
                  "Time Series Databases"],
    "Developer Tools": ["Developer Platforms", "Continuous Integration and Deployment", "Development Environments",
                        "Source Code Management", "Quality Assurance"],
    "Identity": ["Identity and Access Management"],
    "Integration": ["API Management", "Messaging", "Workflow Orchestration"],
    "Internet of Things": ["IoT Analytics", "IoT Platforms"],
    "Management and Governance": ["Architecture", "Compliance", "Cost Management", "Data Governance",
                                  "Disaster Recovery", "Endpoint Management", "Observability", "Support"],
    "Media": ["Content Creation", "Gaming", "Media Streaming", "Mixed Reality"],
    "Migration": ["Data Migration", "Resource Migration"],
    "Mobile": [],
    "Multicloud": ["Multicloud Integration"],
    "Networking": ["Application Networking", "Content Delivery", "Network Connectivity", "Network Infrastructure",
                   "Network Routing", "Network Security"],
    "Security": ["Secret Management", "Security Posture Management", "Threat Detection and Response"],
    "Storage": ["Backup Storage", "Block Storage", "File Storage", "Object Storage", "Storage Platforms"],
    "Web": ["Application Platforms"],
    "Other": [],
}
PARENT = {sub: cat for cat, subs in SUBCATEGORIES.items() for sub in subs + ["Other (%s)" % cat]}
# Null if and only if the other is null.
PAIRS = [("PricingUnit", "PricingQuantity"), ("ConsumedUnit", "ConsumedQuantity"),
         ("CommitmentDiscountUnit", "CommitmentDiscountQuantity"), ("RegionName", "RegionId"),
         ("SubAccountName", "SubAccountId"), ("SubAccountType", "SubAccountId"), ("ResourceType", "ResourceId"),
         ("CommitmentDiscountCategory", "CommitmentDiscountId"), ("CommitmentDiscountType", "CommitmentDiscountId")]
# Null when the other is null.
FOLLOWS = [("ResourceName", "ResourceId"), ("CommitmentDiscountName", "CommitmentDiscountId"),
           ("CommitmentDiscountStatus", "CommitmentDiscountId"), ("CapacityReservationStatus", "CapacityReservationId"),
           ("SkuMeter", "SkuId"), ("SkuPriceDetails", "SkuPriceId")]
# Not null on Usage and Purchase rows that are no correction; null on Tax rows (when present).
PRICED = ["PricingQuantity", "PricingUnit", "ListUnitPrice", "ContractedUnitPrice", "PricingCategory", "SkuId",
          "SkuPriceId", "PricingCurrencyListUnitPrice", "PricingCurrencyContractedUnitPrice"]

NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?(E-?[0-9]+)?$")
DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$")
PASCAL = re.compile(r"[A-Z][A-Za-z0-9]*$")
TIME_UNITS = {"Year", "Month", "Day", "Hour", "Minute", "Second"}
DATA_SIZES = {"b", "Kb", "Mb", "Gb", "Tb", "Pb", "Eb", "Kib", "Mib", "Gib", "Tib", "Pib", "Eib",
              "B", "KB", "MB", "GB", "TB", "PB", "EB", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}


def unit_ok(u):
    """UnitFormat: <plural-units>, <singular-unit>-<plural-time-units> or <plural-units>/<singular-time-unit>,
    optionally with a whole-number quantity; capitalized words or data-size abbreviations."""
    m = re.match(r"(?:([1-9][0-9]*) )?(.+)$", u)
    body = m.group(2)

    def word(w, plural=None):
        if w in DATA_SIZES:
            return True
        base = w[:-1] if plural and w.endswith("s") else w
        if base in TIME_UNITS:
            return plural is None or w.endswith("s") == plural
        return re.match(r"[A-Z][A-Za-z]*( [A-Z][A-Za-z]*)*$", w) is not None

    if "/" in body:
        left, right = body.split("/", 1)
        right = re.sub(r"^[1-9][0-9]* ", "", right)
        return word(left) and right.rstrip("s") in TIME_UNITS
    if "-" in body:
        left, right = body.split("-", 1)
        return word(left) and right.endswith("s") and right[:-1] in TIME_UNITS
    return word(body)


def check(text):
    """Problems found in the CSV text, as messages; empty when it conforms."""
    problems = []
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        return ["empty file: no header"]
    if len(set(header)) != len(header):
        problems.append("a column appears twice")
    for c in MANDATORY:
        if c not in header:
            problems.append("Mandatory column %s missing" % c)
    seen_custom = False
    for c in header:
        if c.startswith("x_"):
            seen_custom = True
            if not PASCAL.match(c[2:]):
                problems.append("custom column %s: not x_ and PascalCase" % c)
        elif c not in FOCUS_COLUMNS:
            problems.append("column %s: not a FOCUS 1.2 column and not prefixed x_" % c)
        elif seen_custom:
            problems.append("column %s: FOCUS columns come before the custom ones" % c)
    for n, cells in enumerate(reader, start=2):
        if len(cells) != len(header):
            problems.append("line %d: %d cells for %d columns" % (n, len(cells), len(header)))
            continue
        row = {c: (v if v != "" else None) for c, v in zip(header, cells)}
        problems += ["line %d: %s" % (n, p) for p in check_row(row)]
    return problems


def check_row(row):
    out = []

    def present(c):
        return c in row

    for c, v in row.items():
        if v is None:
            if c in NOT_NULL:
                out.append("%s is null" % c)
            continue
        if v.strip() == "":
            out.append("%s is blank, not null" % c)
        if c in DECIMAL and not NUMBER.match(v):
            out.append("%s %r: not in NumericFormat" % (c, v))
        if c in NON_NEGATIVE and NUMBER.match(v) and float(v) < 0:
            out.append("%s %r: a unit price is never negative" % (c, v))
        if c in DATETIME and not DATE.match(v):
            out.append("%s %r: not YYYY-MM-DDTHH:mm:ssZ" % (c, v))
        if c in ALLOWED and v not in ALLOWED[c]:
            out.append("%s %r: not one of %s" % (c, v, sorted(ALLOWED[c])))
        if c in ("BillingCurrency",) and not re.match(r"[A-Z]{3}$", v):
            out.append("%s %r: not an ISO 4217 code" % (c, v))
        if c in ("PricingUnit", "ConsumedUnit", "CommitmentDiscountUnit") and not unit_ok(v):
            out.append("%s %r: not in UnitFormat" % (c, v))
        if c in JSON_COLUMNS:
            out += check_key_value(c, v)
    if present("ServiceCategory") and row["ServiceCategory"] not in SUBCATEGORIES:
        out.append("ServiceCategory %r: not an allowed value" % row["ServiceCategory"])
    if present("ServiceSubcategory") and row["ServiceSubcategory"] is not None:
        parent = PARENT.get(row["ServiceSubcategory"])
        if parent is None:
            out.append("ServiceSubcategory %r: not an allowed value" % row["ServiceSubcategory"])
        elif parent != row.get("ServiceCategory"):
            out.append("ServiceSubcategory %r belongs to %r, not %r" % (row["ServiceSubcategory"], parent,
                                                                         row.get("ServiceCategory")))
    for a, b in PAIRS:
        if present(a) and present(b) and (row[a] is None) != (row[b] is None):
            out.append("%s and %s: one is null, the other not" % (a, b))
    for a, b in FOLLOWS:
        if present(a) and present(b) and row[b] is None and row[a] is not None:
            out.append("%s is set while %s is null" % (a, b))
    if row.get("ResourceName") is not None and row.get("ResourceName") == row.get("ResourceId"):
        out.append("ResourceName repeats ResourceId")
    category, correction = row.get("ChargeCategory"), row.get("ChargeClass") == "Correction"
    for c in PRICED:
        if not present(c):
            continue
        if category == "Tax" and row[c] is not None:
            out.append("%s must be null on a Tax row" % c)
        if category in ("Usage", "Purchase") and not correction and row[c] is None:
            out.append("%s is null on a %s row" % (c, category))
    if present("ConsumedQuantity"):
        unused = row.get("CommitmentDiscountStatus") == "Unused"
        if category == "Usage" and not correction and not unused and row["ConsumedQuantity"] is None:
            out.append("ConsumedQuantity is null on a Usage row")
        if (category != "Usage" or unused) and row["ConsumedQuantity"] is not None:
            out.append("ConsumedQuantity is set on a row that is no usage")
    if category == "Purchase" and row.get("ChargeFrequency") == "Usage-Based":
        out.append("a Purchase is never Usage-Based")
    for price, cost in (("ListUnitPrice", "ListCost"), ("ContractedUnitPrice", "ContractedCost")):
        if row.get(price) is not None and row.get("PricingQuantity") is not None and not correction:
            want = float(row[price]) * float(row["PricingQuantity"])
            if abs(want - float(row[cost])) > 1e-9 * max(1.0, abs(want)):
                out.append("%s is not %s x PricingQuantity" % (cost, price))
    for start, end in (("ChargePeriodStart", "ChargePeriodEnd"), ("BillingPeriodStart", "BillingPeriodEnd")):
        if row.get(start) and row.get(end) and DATE.match(row[start]) and DATE.match(row[end]) \
                and not row[start] < row[end]:
            out.append("%s is not before %s" % (start, end))
    return out


def check_key_value(column, text):
    try:
        pairs = json.loads(text, object_pairs_hook=lambda kv: kv)
    except ValueError as e:
        return ["%s: not JSON (%s)" % (column, e)]
    if not isinstance(pairs, list):
        return ["%s: not a JSON object" % column]
    out = []
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        out.append("%s: a key appears twice" % column)
    for k, v in pairs:
        if isinstance(v, (list, dict)):  # a nested object reads as a list of pairs here
            out.append("%s: the value of %r is not a scalar" % (column, k))
    return out


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    with open(sys.argv[1], newline="", encoding="utf-8") as f:
        problems = check(f.read())
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
