"""Writes param_layouts.inc for akunu._testing from src/core/kernel_params.h:
one AK_FIELD(struct, field) line per field of every struct, in declaration
order, closed by AK_STRUCT(struct); one AK_ENUM_VALUE(enum, name) per value of
every enum. The compiler then gives sizeof / offsetof, so the parameter
structs are declared once, in the header.

Usage: python param_layouts.py KERNEL_PARAMS_H OUTPUT_INC"""

import os
import re
import sys


def strip_comments(text):
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def read(header_text):
    """([(struct, [field])], [(enum, [value name])]) in declaration order."""
    text = strip_comments(header_text)
    structs = []
    for name, body in re.findall(r"\bstruct\s+(\w+)\s*\{(.*?)\};", text, flags=re.S):
        fields = []
        for decl in body.split(";"):
            decl = " ".join(decl.split())
            if not decl:
                continue
            m = re.fullmatch(r"\w+ (.+)", decl)
            if not m:
                raise SystemExit(f"{name}: cannot read the declaration '{decl}'")
            for d in m.group(1).split(","):
                dm = re.fullmatch(r"\s*(\w+)\s*(\[\d+\])?\s*", d)
                if not dm:
                    raise SystemExit(f"{name}: cannot read the declarator '{d}'")
                fields.append(dm.group(1))
        structs.append((name, fields))
    enums = []
    for name, body in re.findall(r"\benum\s+(\w+)\s*(?::\s*\w+\s*)?\{(.*?)\}", text, flags=re.S):
        enums.append((name, [v.split("=")[0].strip() for v in body.split(",") if v.strip()]))
    return structs, enums


def main():
    header, output = sys.argv[1], sys.argv[2]
    structs, enums = read(open(header).read())
    lines = [f"// Generated from {os.path.basename(header)} by src/python/param_layouts.py."]
    for name, fields in structs:
        lines += [f"AK_FIELD({name}, {f})" for f in fields] + [f"AK_STRUCT({name})"]
    for name, values in enums:
        lines += [f"AK_ENUM_VALUE({name}, {v})" for v in values]
    text = "\n".join(lines) + "\n"
    try:
        if open(output).read() == text:
            return
    except OSError:
        pass
    with open(output, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
