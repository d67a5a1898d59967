// Package routing is the codec of routing records: the experts an MoE
// router selected for every token × layer × top-k slot of one chunk,
// which the training forward pass replays (R³, ARCHITECTURE.md §1.3).
//
// # In memory
//
// A Record's IDs is one contiguous little-endian buffer of shape
// [T, L, k]: uint8 when the model has ≤ 256 experts, uint16 above. Each
// (token, layer) set is strictly ascending and below the expert count.
// A GPU consumer views it without copying:
//
//	ids = numpy.frombuffer(buf, dtype="<u1" or "<u2").reshape(T, L, k)
//
// # Encoded record (format version 1)
//
//	 0      1      2                                        n            end-4   end
//	+------+------+----------------------------------------+------------+-------+
//	| 0x01 | enc  | uvarint T | uvarint L | uvarint k | uvarint E | payload | crc32c |
//	+------+------+----------------------------------------+------------+-------+
//	version  encoding                header                          Castagnoli, LE,
//	                                                                  over bytes [0, end-4)
//
// enc selects the payload:
//
//	0 packed       the raw [T, L, k] id buffer, T·L·k·width bytes
//	1 packed+zstd  one zstd frame of the raw buffer
//	2 rank         T·L ranks, B = bitlen(C(E,k) − 1) bits each, packed LSB-first,
//	               zero-padded to a byte; set (t, l) is rank number t·L + l
//	3 delta        k+1 code-length bytes, then an LSB-first bit stream:
//
//	               token 0:  L ranks of B bits (as in rank)
//	               token t ≥ 1, per layer l, against set (t−1, l):
//	                 r   prefix code of the number of experts replaced (0..k),
//	                     canonical Huffman with the code lengths above
//	                 v   if r > 0: bitlen(C(k,r)·C(E−k,r) − 1) bits of
//	                     v = rank(dropped) · C(E−k, r) + rank(added)
//	                     dropped: positions 0..k−1 in the previous set that left
//	                     added:   new experts, each indexed among the E−k experts
//	                              not in the previous set
//
// The rank of an ascending set c₀ < c₁ < … < c_{m−1} is Σ C(cⱼ, j+1) (the
// combinatorial number system): a bijection onto [0, C(n, m)), so a
// uniformly random 8-of-256 set costs bitlen(C(256,8) − 1) = 49 bits
// instead of 64 raw (0.766×). Rank and delta need every binomial to fit
// 63 bits (see Rankable); larger shapes use packed+zstd.
//
// Auto chooses rank or delta by their exact sizes, which are known from
// one pass over the record before writing: delta wins by a wide margin
// when routers keep most experts from one token to the next, rank when
// they do not. Decoders check the CRC, the header's shape limits, every
// rank's range and the payload length, so damaged input gives an error
// wrapping ErrCorrupt and never a panic or an invalid record.
//
// testdata/layout.golden pins these bytes (go test -run Golden -update
// rewrites it); a layout change needs a new FormatVersion. The zstd frame
// of packed+zstd may change with the zstd library; every version decodes.
package routing
