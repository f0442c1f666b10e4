#!/usr/bin/python3
"""doc_examples.py: the examples in a doc page are the golden outputs of burstc rank.

usage: doc_examples.py DOC DIR [--update]

A block in DOC introduced by the line `<!-- golden: NAME -->` and fenced by ``` must
read `$ burstc rank ARGS` (ARGS from DIR/NAME.cmd) followed by DIR/NAME.out, the
output that cli.sh checks; after `<!-- golden-err: NAME -->`, DIR/NAME.err (the
messages).  Prints each block that differs and exits 1; with --update, rewrites the
blocks instead.
"""
import os
import re
import sys

doc, cases = sys.argv[1], sys.argv[2]
update = "--update" in sys.argv[3:]
text = open(doc, encoding="utf-8").read()
block = re.compile(r"(<!-- golden(-err)?: ([\w-]+) -->\n( *)```\n)(.*?)(\4```\n)", re.S)
bad = 0
count = 0


def read(name, ext):
    with open(os.path.join(cases, name + ext), encoding="utf-8") as f:
        return f.read()


def check(m):
    global bad, count
    count += 1
    name, indent = m.group(3), m.group(4)
    if m.group(2):
        want = read(name, ".err")
    else:
        want = "$ burstc rank " + read(name, ".cmd").strip() + "\n" + read(name, ".out")
    want = "".join(indent + line + "\n" for line in want.splitlines())
    if m.group(5) != want:
        if not update:
            print("%s: the example '%s' differs from its golden output:\n--- doc\n%s--- golden\n%s"
                  % (doc, name, m.group(5), want))
        bad += 1
    return m.group(1) + want + m.group(6)


new = block.sub(check, text)
if count == 0:
    print("%s: no golden examples found" % doc)
    sys.exit(1)
if update:
    if new != text:
        with open(doc, "w", encoding="utf-8") as f:
            f.write(new)
    sys.exit(0)
if bad:
    print("doc_examples.py: %d of %d examples differ (RANK_CLI_UPDATE=1 rewrites them)" % (bad, count))
    sys.exit(1)
print("doc_examples.py: %d examples ok" % count)
