"""Regenerate ``aeron_numba/layout/archive_schema.py`` and ``cluster_schema.py`` from the spec's message tables,
and the proxies' typed send methods (``aeron_numba/codecs/archive_proxies.py``, ``cluster_proxies.py``) from those
schema descriptions.

The spec's field tables (``spec/archive.md`` §8, ``spec/cluster.md`` §13) were themselves generated from Aeron's
SBE schemas, so the schema description is transcribed by this script, never retyped by hand:

    python scripts/generate_sbe_schemas.py [--spec ../shared/spec]   # schemas, then proxies
    python scripts/generate_sbe_schemas.py --proxies-only                # proxies (no spec needed)

Table rows understood (``|`` separated: offset, size, field, type, note):

    | 0 | 8 | controlSessionId | int64 |  |                                   a fixed field
    | 28 | 4 | version | version_t (int32) | since v4, optional |               schema type (primitive), since
    | var | 4+n | errorMessage | varAsciiEncoding (u32 length + bytes) |  |     a var-length field
    | (after block) | var | group **snapshots** (...; entry blockLength=44) | | |  a repeating group
    | ↳ +0 | 8 | snapshots.recordingId | int64 |  |                          a field of the group above
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a checkout: this checkout's package
    sys.path.insert(0, str(ROOT))

from aeron_numba.layout.sbe import snake_case  # noqa: E402 (after the path is set)

HEADING = re.compile(r"^#### (\w+)\s*$")
TEMPLATE = re.compile(r"^templateId=(\d+), blockLength=(\d+)")
TYPE = re.compile(r"^(\w+)(?: \((\w+)\))?$")
GROUP = re.compile(r"group \*\*(\w+)\*\*.*entry blockLength=(\d+)")
SINCE = re.compile(r"since v(\d+)")
ENUM = re.compile(r"(\w+) \{([^}]*)\}")
PRIMITIVES = {"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64"}


def parse_tables(text: str, section: str) -> list[dict]:
    body = text[text.index(section):]
    messages: list[dict] = []
    current = group = None
    for line in body.splitlines():
        if m := HEADING.match(line):
            current = {"name": m.group(1), "fields": [], "groups": [], "var": []}
            messages.append(current)
            group = None
            continue
        if current is None:
            continue
        if m := TEMPLATE.match(line):
            current["template_id"], current["block_length"] = int(m.group(1)), int(m.group(2))
            continue
        if not line.startswith("| ") or line.startswith("| offset") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        offset, _size, name, type_text, note = (cells + [""] * 5)[:5]
        if offset == "(after block)":
            m = GROUP.search(name)
            group = {"name": snake_case(m.group(1)), "block_length": int(m.group(2)), "fields": [], "var": []}
            current["groups"].append(group)
            continue
        in_group = offset.startswith("↳")
        target = group if in_group else current
        if in_group:
            offset = offset.lstrip("↳").strip().lstrip("+")
            name = name.split(".", 1)[1]
        since = int(m.group(1)) if (m := SINCE.search(note)) else 0
        if offset == "var":
            kind = "VAR_ASCII" if type_text.startswith("varAscii") else "VAR_DATA"
            target["var"].append((snake_case(name), kind, since))
            continue
        m = TYPE.match(type_text)
        type_name, primitive = m.group(1), m.group(2) or m.group(1)
        if primitive not in PRIMITIVES:
            raise SystemExit(f"{current['name']}.{name}: unknown type {type_text!r}")
        target["fields"].append((snake_case(name), primitive, int(offset), type_name, since))
    return messages


def parse_enums(text: str, section: str) -> dict[str, dict[str, int]]:
    """``Name {A 0, B 1}`` lists in the prose before the tables."""
    prose = text[text.index(section):].split("#### ", 1)[0]
    enums = {}
    for name, values in ENUM.findall(prose.replace("\n", " ")):
        enums[name] = {v.split()[0]: int(v.split()[1]) for v in values.split(",") if v.strip()}
    return enums


def render(module_doc: str, const: str, title: str, schema_id: int, version: int, messages: list[dict],
           enums: dict) -> str:
    def fields(items, indent):
        out = []
        for name, primitive, offset, type_name, since in items:
            extra = f", since={since}" if since else ""
            out.append(f'{indent}SbeField("{name}", "{primitive}", {offset}, "{type_name}"{extra}),')
        return out

    def var(items, indent):
        return [f'{indent}SbeVarField("{name}", {kind}{f", since={since}" if since else ""}),'
                for name, kind, since in items]

    lines = [f'"""{module_doc}"""', "", "from __future__ import annotations", "",
             "from aeron_numba.layout.sbe import VAR_ASCII, VAR_DATA, SbeField, SbeGroup, SbeMessage, SbeSchema, SbeVarField",
             "", f"{const}_SCHEMA_ID = {schema_id}", f"{const}_SCHEMA_VERSION = {version}", "", "ENUMS = {"]
    for name, values in enums.items():
        lines.append(f'    "{name}": {values!r},')
    lines += ["}", "", "MESSAGES = ("]
    for m in messages:
        lines.append(f'    SbeMessage("{m["name"]}", {m["template_id"]}, {m["block_length"]}, (')
        lines += fields(m["fields"], " " * 8)
        if m["groups"]:
            lines.append("    ), groups=(")
            for g in m["groups"]:
                lines.append(f'        SbeGroup("{g["name"]}", {g["block_length"]}, (')
                lines += fields(g["fields"], " " * 12)
                lines.append("        ), var_fields=(")
                lines += var(g["var"], " " * 12)
                lines.append("        )),")
        if m["var"]:
            lines.append("    ), var_fields=(")
            lines += var(m["var"], " " * 8)
        lines.append("    )),")
    lines += [")", "", f'{const}_SCHEMA = SbeSchema("{title}", {const}_SCHEMA_ID, {const}_SCHEMA_VERSION, MESSAGES, ENUMS)', ""]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ proxies
#: The generated proxy modules: (file under aeron_numba/codecs, the codec's module and name, the schema's module
#: and name, then per class: its name, what it sends, and the names of the codec module's tuples of the messages
#: it sends).
PROXY_MODULES = (
    ("archive_proxies.py", "aeron_numba.codecs.archive_messages", "ARCHIVE", "aeron_numba.layout.archive_schema",
     "ARCHIVE_SCHEMA", (
         ("ArchiveProxy", "The requests an archive client sends on its control publication (Aeron's ArchiveProxy).",
          ("CONTROL_REQUESTS",)),
         ("ControlResponseProxyBase", "What an archive sends a control session on its response publication (Aeron's "
          "ControlResponseProxy;\n    ``archive/control_response_proxy.py`` adds the catalog's descriptors).",
          ("CONTROL_RESPONSES",)),
         ("RecordingEventsProxy", "The recording events an archive publishes on its events channel (Aeron's "
          "RecordingEventsProxy).", ("RECORDING_EVENTS",)),
     )),
    ("cluster_proxies.py", "aeron_numba.codecs.cluster_messages", "CLUSTER", "aeron_numba.layout.cluster_schema",
     "CLUSTER_SCHEMA", (
         ("IngressProxy", "What a cluster client offers on its ingress publication (Aeron's AeronCluster writes "
          "these itself).", ("INGRESS",)),
         ("EgressPublisher", "What a cluster sends a client on its egress (Aeron's EgressPublisher; a service's "
          "replies go behind a\n    SessionMessageHeader, as Aeron's ClientSession sends them).", ("EGRESS",)),
         ("ConsensusPublisher", "What a member sends other members on the consensus channel, and backup or standby "
          "nodes on their\n    response channels (Aeron's ConsensusPublisher).", ("CONSENSUS", "BACKUP_RESPONSES")),
         ("ServiceProxy", "What the consensus module sends its services on the service stream (Aeron's "
          "ServiceProxy).", ("TO_SERVICE",)),
         ("ConsensusModuleProxy", "What a service (or ClusterTool) sends the consensus module on its stream (Aeron's "
          "ConsensusModuleProxy).", ("TO_CONSENSUS_MODULE",)),
         ("LogPublisher", "What the leader appends to the log (Aeron's LogPublisher).", ("LOG",)),
         ("ConsensusModuleSnapshotTaker", "What the consensus module writes to its snapshot (Aeron's "
          "ConsensusModuleSnapshotTaker).", ("CONSENSUS_MODULE_SNAPSHOT",)),
         ("ServiceSnapshotTaker", "What a service's container writes to its snapshot around the application's state "
          "(Aeron's\n    ServiceSnapshotTaker).", ("SERVICE_SNAPSHOT",)),
     )),
)

_PYTHON_TYPES = {"VAR_ASCII": "str", "VAR_DATA": "bytes", "ascii": "str", "data": "bytes"}


def _wrap(head: str, items: list[str], tail: str, indent: str) -> list[str]:
    """``head`` + comma-separated ``items`` + ``tail`` within 120 columns, continuation lines under ``indent``."""
    lines, line = [], head
    for i, item in enumerate(items):
        piece = item + (", " if i < len(items) - 1 else tail)
        if len(line) + len(piece.rstrip()) > 120:
            lines.append(line.rstrip())
            line = indent
        line += piece
    if not items:
        line += tail
    lines.append(line)
    return lines


def render_proxies(file_name: str, codec_module: str, codec: str, schema_module: str, schema_name: str,
                   classes) -> str:
    schema = getattr(importlib.import_module(schema_module), schema_name)
    messages_of = importlib.import_module(codec_module)
    codec_object = getattr(messages_of, codec)
    payload_follows = codec_object.payload_follows
    lines = [f'"""AUTOGENERATED by scripts/generate_sbe_schemas.py from ``{schema_module}``: do not edit; fix the',
             "generator and regenerate (tests/unit/codecs/test_sbe_proxy.py checks the file is what it makes).", "",
             "One typed send method per outgoing message, named as the message in snake_case, its parameters the",
             "message's fields; each encodes into the proxy's reused buffer and offers it (``codecs/sbe_proxy.py``):",
             'True once the publication took it, False otherwise (``last_result`` says why).']
    if payload_follows:
        lines += ["", f"{', '.join(sorted(payload_follows))}: the application's payload follows the message in the "
                  "same fragment;", "its send methods copy ``payload`` after it (``codecs/sbe.py``)."]
    lines += ['"""', "", "from __future__ import annotations", "", f"from {codec_module} import {codec}",
              "from aeron_numba.codecs.sbe_proxy import SbeProxy"]
    for class_name, doc, sends in classes:
        chosen = {name for tuple_name in sends for name in getattr(messages_of, tuple_name)}
        unknown = chosen - {m.name for m in schema.messages}
        if unknown:
            raise SystemExit(f"{class_name}: {sorted(unknown)} are not messages of {schema_module}")
        lines += ["", "", f"class {class_name}(SbeProxy):", f'    """{doc}"""', "",
                  "    def __init__(self, publication, **options):",
                  f"        super().__init__({codec}, publication, **options)"]
        for message in schema.messages:
            if message.name not in chosen:
                continue
            types = {f.name: "int" for f in message.fields} | {g.name: "tuple" for g in message.groups} | \
                {v.name: _PYTHON_TYPES[v.kind] for v in message.var_fields} | {"payload": "bytes"}
            names = codec_object.attribute_names(message.name)  # "payload" last if the application's bytes follow
            params = [f"{n}: {types[n]}" for n in names]
            method_doc = f"{message.name} (templateId={message.template_id})."
            if message.name in payload_follows:
                method_doc = method_doc[:-1] + ", then ``payload`` (any bytes-like) after it."
            lines.append("")
            lines += _wrap(f"    def {snake_case(message.name)}(self, ", params, ") -> bool:", " " * 12)
            lines.append(f'        """{method_doc}"""')
            lines += _wrap(f"        return self.offer_message({codec}.{message.name}(",
                           [f"{n}={n}" for n in names], "))", " " * 12)
    return "\n".join(lines) + "\n"


def generated_proxies() -> dict[Path, str]:
    """Each proxy module's path and the text the generator makes for it."""
    return {ROOT / "aeron_numba" / "codecs" / job[0]: render_proxies(*job) for job in PROXY_MODULES}


def write_proxies() -> None:
    for path, text in generated_proxies().items():
        path.write_text(text)
        print(f"{path.name}: {text.count('    def ') - text.count('def __init__')} send methods")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spec", default=str(ROOT.parent / "shared" / "spec"))
    parser.add_argument("--proxies-only", action="store_true", help="regenerate the proxies alone")
    args = parser.parse_args(argv)
    if args.proxies_only:
        write_proxies()
        return 0
    spec = Path(args.spec)
    jobs = (
        ("archive.md", "## 8. Message field layouts", "archive_schema.py", "ARCHIVE", "archive", 101, 10,
         "### 6.4 Message catalogue"),
        ("cluster.md", "## 13. Message field layouts", "cluster_schema.py", "CLUSTER", "cluster", 111, 12,
         "## 13. Message field layouts"),
    )
    for source, section, target, const, title, schema_id, version, enum_section in jobs:
        text = (spec / source).read_text()
        messages = parse_tables(text, section)
        enums = parse_enums(text, enum_section)
        doc = (f"The Aeron {title} SBE schema (id {schema_id}, version {version}): every message's fields, groups and\n"
               f"var-length fields, generated by scripts/generate_sbe_schemas.py from spec/{source} ({section[3:]}).\n"
               "Do not edit by hand: fix the generator or the spec and regenerate.\n")
        (ROOT / "aeron_numba" / "layout" / target).write_text(render(doc, const, title, schema_id, version, messages, enums))
        print(f"{target}: {len(messages)} messages, {len(enums)} enums")
    importlib.invalidate_caches()
    write_proxies()
    return 0


if __name__ == "__main__":
    sys.exit(main())
