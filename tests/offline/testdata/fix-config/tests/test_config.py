from pathlib import Path

CONF = Path("/app/app.conf")


def entries():
    out = {}
    for line in CONF.read_text().splitlines():
        if line.startswith("#") or " = " not in line:
            continue
        k, v = line.split(" = ", 1)
        out[k] = v
    return out


def test_port():
    assert entries().get("port") == "8080"


def test_log_level():
    assert entries().get("log_level") == "debug"


def test_other_lines_kept():
    e = entries()
    assert e.get("name") == "inventory" and e.get("workers") == "4" and "prot" not in e
    assert CONF.read_text().startswith("# service configuration\n")


def test_keys_file():
    assert Path("/app/keys.txt").read_text().split() == ["log_level", "name", "port", "workers"]
