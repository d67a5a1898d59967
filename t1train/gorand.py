"""Go's math/rand/v2 PCG source and Rand.Perm, bit for bit: the reference trainer draws each
epoch's order of chunks as rand.New(rand.NewPCG(version, 0x70706f)).Perm(n), and SFT each pass's
order as rand.New(rand.NewPCG(seed, pass)).Perm(n)."""

_M64 = (1 << 64) - 1
_MUL = (2549297995355413924 << 64) | 4865540595714422341
_INC = (6364136223846793005 << 64) | 1442695040888963407
_CHEAP_MUL = 0xDA942042E4DD58B5


class PCG:
    """rand.NewPCG(seed1, seed2): a 128-bit LCG with the DXSM output function."""

    def __init__(self, seed1: int, seed2: int):
        self.state = ((seed1 & _M64) << 64) | (seed2 & _M64)

    def uint64(self) -> int:
        self.state = (self.state * _MUL + _INC) & ((1 << 128) - 1)
        hi, lo = self.state >> 64, self.state & _M64
        hi ^= hi >> 32
        hi = (hi * _CHEAP_MUL) & _M64
        hi ^= hi >> 48
        hi = (hi * (lo | 1)) & _M64
        return hi

    def uint64n(self, n: int) -> int:
        if n & (n - 1) == 0:
            return self.uint64() & (n - 1)
        prod = self.uint64() * n
        hi, lo = prod >> 64, prod & _M64
        if lo < n:
            thresh = (-n) % n
            while lo < thresh:
                prod = self.uint64() * n
                hi, lo = prod >> 64, prod & _M64
        return hi

    def perm(self, n: int) -> list[int]:
        p = list(range(n))
        for i in range(n - 1, 0, -1):
            j = self.uint64n(i + 1)
            p[i], p[j] = p[j], p[i]
        return p
