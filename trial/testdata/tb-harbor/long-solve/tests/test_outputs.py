"""The whole table, which a solution stopped early leaves short."""


def test_table():
    with open("/app/sums.txt") as f:
        rows = [tuple(map(int, l.split())) for l in f]
    assert rows == [(n, n * (n + 1) // 2) for n in range(1, 41)]
