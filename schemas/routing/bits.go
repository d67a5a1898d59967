package routing

import (
	"encoding/binary"
	"errors"
)

// bitWriter appends values LSB-first to a byte slice.
type bitWriter struct {
	buf []byte
	acc uint64
	n   uint
}

// put writes the low nb bits of v; nb ≤ 64.
func (w *bitWriter) put(v uint64, nb int) {
	if nb == 0 {
		return
	}
	if nb < 64 {
		v &= 1<<uint(nb) - 1
	}
	free := 64 - w.n
	if uint(nb) < free {
		w.acc |= v << w.n
		w.n += uint(nb)
		return
	}
	w.acc |= v << w.n
	w.buf = binary.LittleEndian.AppendUint64(w.buf, w.acc)
	used := free
	if used == 64 {
		w.acc = 0
	} else {
		w.acc = v >> used
	}
	w.n = uint(nb) - used
}

// flush writes the pending bits, zero-padded to a byte boundary.
func (w *bitWriter) flush() []byte {
	for w.n > 0 {
		w.buf = append(w.buf, byte(w.acc))
		w.acc >>= 8
		if w.n < 8 {
			w.n = 0
		} else {
			w.n -= 8
		}
	}
	return w.buf
}

var errShort = errors.New("bit stream ends early")

// bitReader reads LSB-first values from a byte slice.
type bitReader struct {
	buf []byte
	pos uint64 // in bits
	end uint64 // len(buf)*8
}

func newBitReader(b []byte) bitReader { return bitReader{buf: b, end: uint64(len(b)) * 8} }

// peek56 returns the next 56 (or more) bits without consuming them; bits
// past the end read as zero.
func (r *bitReader) peek56() uint64 {
	i := r.pos >> 3
	var v uint64
	if i+8 <= uint64(len(r.buf)) {
		v = binary.LittleEndian.Uint64(r.buf[i:])
	} else {
		var tmp [8]byte
		if i < uint64(len(r.buf)) {
			copy(tmp[:], r.buf[i:])
		}
		v = binary.LittleEndian.Uint64(tmp[:])
	}
	return v >> (r.pos & 7)
}

// get reads nb ≤ 64 bits.
func (r *bitReader) get(nb int) (uint64, error) {
	if r.pos+uint64(nb) > r.end {
		return 0, errShort
	}
	if nb <= 56 {
		v := r.peek56() & (1<<uint(nb) - 1)
		r.pos += uint64(nb)
		return v, nil
	}
	lo := r.peek56() & (1<<32 - 1)
	r.pos += 32
	hi := r.peek56() & (1<<uint(nb-32) - 1)
	r.pos += uint64(nb - 32)
	return lo | hi<<32, nil
}
