"""Checks what the build wrote."""


def test_built():
    with open("/app/build/out") as f:
        assert f.read() == "built\n"
