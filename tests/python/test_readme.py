"""The README's "How it works" tree and environment table against the repository: a file added,
renamed or removed, or a variable read, shows here instead of going stale in the README."""
import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FOLDERS = ["python/torch_pjrt", "python/torch_pjrt/distributed", "csrc/torch",
           "csrc/torch/distributed", "csrc/exec", "csrc/ops", "csrc/hlo", "csrc/runtime", "csrc/dist",
           "csrc/base", "tools"]
SOURCES = ("*.py", "*.c", "*.cpp")


def _readme():
    with open(os.path.join(ROOT, "README.md")) as f:
        return f.read()


def _tree():
    """{folder: its part of the tree's text}."""
    text = _readme()
    block = text[text.index("## How it works"):]
    block = block[block.index("```\n") + 4:]
    block = block[:block.index("```")]
    parts, folder = {}, None
    for line in block.splitlines():
        m = re.match(r"(\S+)/\s", line)
        if m:
            folder = m.group(1)
            parts[folder] = ""
            line = line[m.end():]
        assert folder is not None, line
        parts[folder] += line + "\n"
    return parts


def test_the_tree_names_every_folder_and_source_file_and_no_other():
    parts = _tree()
    assert sorted(parts) == sorted(FOLDERS), sorted(parts)
    for folder, text in parts.items():
        names = {os.path.basename(p) for pattern in SOURCES
                 for p in glob.glob(os.path.join(ROOT, folder, pattern))}
        named = set(re.findall(r"[\w./]+\.(?:py|cpp|c|h|def)\b", text))
        missing = names - named
        assert not missing, f"{folder}: the README's tree leaves out {sorted(missing)}"
        for n in named:  # a file of the folder, or a path from the root or from csrc/
            assert any(os.path.exists(os.path.join(ROOT, base, n)) for base in (folder, "", "csrc")), \
                f"{folder}: the tree names {n}, which is gone"


def test_the_environment_table_names_every_variable_read():
    read = set()
    for pattern in ("csrc/**/*.c", "csrc/**/*.cpp", "csrc/**/*.h", "python/torch_pjrt/**/*.py"):
        for path in glob.glob(os.path.join(ROOT, pattern), recursive=True):
            with open(path) as f:
                read |= set(re.findall(r"\bTORCH_PJRT_[A-Z0-9_]*[A-Z0-9]\b", f.read()))
    text = _readme()
    table = text[text.index("## Environment variables"):text.index("## Introspection")]
    listed = set(re.findall(r"^\| `(TORCH_PJRT_[A-Z0-9_]+)`", table, re.M))
    assert read <= listed, f"read but not in the README's table: {sorted(read - listed)}"
    assert listed <= read, f"in the README's table but read nowhere: {sorted(listed - read)}"
